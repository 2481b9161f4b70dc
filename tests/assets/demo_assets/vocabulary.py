"""Word lists of the synthetic English-like text (topics, people, places, connectors, prompts)."""

from __future__ import annotations

from typing import Any


# ----------------------------------------------------------------------------------------------------
# Synthetic English-like text.
# ----------------------------------------------------------------------------------------------------
def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ADJECTIVES = _words(
    "small large bright quiet simple complex careful rapid gentle stable fresh ancient modern useful "
    "common rare strong light heavy warm cold clear hidden natural practical efficient reliable "
    "curious important typical narrow wide sharp smooth rough dense thin thick early late steady noisy "
    "gradual remarkable subtle obvious delicate robust fragile popular local global basic advanced "
    "flexible precise"
)
ADVERBS = _words(
    "quickly slowly carefully usually rarely often gradually suddenly roughly exactly mostly gently "
    "evenly steadily partly fully clearly easily"
)
CONNECTORS = (
    "However,",
    "In practice,",
    "For example,",
    "As a result,",
    "On the other hand,",
    "In most cases,",
    "Interestingly,",
    "Because of this,",
    "At the same time,",
    "In short,",
    "First,",
    "Next,",
    "Finally,",
    "Of course,",
    "In other words,",
    "To be fair,",
    "Surprisingly,",
    "Historically,",
)
SYLLABLES = _words(
    "ka lo ri ven thos mar el dra sil qua bor ten vi nu zan pel or ix ul ser mon ta pha ly cor dun ge "
    "bri an os te ra mi lu fen"
)
PLACES = (
    "Lisbon",
    "Kyoto",
    "Zürich",
    "São Paulo",
    "Reykjavík",
    "Cape Town",
    "Marrakesh",
    "Oslo",
    "Hanoi",
    "Lima",
    "Prague",
    "Vancouver",
    "Istanbul",
    "Nairobi",
    "Seville",
    "Melbourne",
    "Montréal",
    "Kraków",
    "Bogotá",
    "Edinburgh",
)
PEOPLE = (
    "Ada",
    "Bruno",
    "Chen",
    "Dalia",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ines",
    "Jonas",
    "Keiko",
    "Luis",
    "Maya",
    "Nikhil",
    "Olga",
    "Priya",
    "Rafael",
    "Sofia",
    "Tariq",
    "Yuki",
)

TOPICS: dict[str, dict[str, Any]] = {
    "science": {
        "noun": _words(
            "atom molecule cell protein enzyme galaxy planet star photon electron magnet crystal gene "
            "virus ocean volcano glacier fossil forest river cloud storm battery circuit laser "
            "telescope microscope sample reaction solution particle wave field orbit comet neuron "
            "membrane catalyst isotope"
        ),
        "verb": _words(
            "absorb emit reflect produce change measure transform attract release store convert heat "
            "cool split bind detect carry"
        ),
        "unit": ("joules", "meters", "kilograms", "watts", "volts", "kelvin", "nanometers"),
        "templates": (
            "The {adj} {noun} {verb} {a_noun} when the temperature rises above {num} degrees.",
            "Scientists measured {num} samples and found that {a_noun} {verb} energy {adv}.",
            "Each {noun} {verb} light in {a_adj} way, which is why the {noun} looks {adj}.",
            "{connector} the {noun} {verb} the {noun} at a rate of {dec} {unit} per second.",
            "When {a_noun} meets {a_noun}, the result is often {a_adj} {noun}.",
            "In {year}, researchers at the {Name} Institute observed {a_adj} {noun} near the {noun}.",
            "A typical {noun} contains about {num} units of energy, roughly {dec} {unit} in total.",
            "The experiment showed that the {noun} can {verb_base} {a_noun} in {num_small} seconds.",
            "Without {a_noun}, the {noun} would {verb_base} far less {adj} material.",
            "Models of the {noun} predict a change of {dec} percent over the next {num_small} years.",
        ),
        "questions": (
            "Why does {a_noun} {verb_base} {a_noun}?",
            "Can you explain how {a_adj} {noun} works?",
            "What happens to {a_noun} at {num} degrees Celsius?",
            "How do scientists study the {noun} and the {noun}?",
            "Is it true that every {noun} can {verb_base} {a_noun}?",
            "Explain the role of the {noun} in simple terms.",
        ),
    },
    "cooking": {
        "noun": _words(
            "onion garlic tomato potato carrot lemon butter flour sugar rice pasta bean lentil "
            "mushroom pepper spinach cheese egg chicken salmon tofu broth sauce dough bread soup salad "
            "pan oven pot bowl skillet ginger basil yogurt honey vinegar"
        ),
        "verb": _words(
            "chop slice stir bake roast simmer whisk season fry boil mix fold knead grate melt toast marinate"
        ),
        "unit": ("grams", "cups", "tablespoons", "teaspoons", "milliliters"),
        "templates": (
            "{Verb_base} the {noun} for {num_small} minutes until it turns golden.",
            "Add {num} grams of {noun} to the {noun} and {verb_base} {adv}.",
            "A {adj} {noun} goes well with {a_noun} and a pinch of salt.",
            "Preheat the oven to {temp} degrees and {verb_base} the {noun} on a tray.",
            "{connector} you can replace the {noun} with {a_noun} if you prefer {a_adj} flavor.",
            "My grandmother always said that {a_adj} {noun} needs {num_small} {unit} of {noun}.",
            "Let the {noun} rest for {num_small} minutes before you {verb_base} it.",
            "Keep the heat low, otherwise the {noun} will burn and taste {adj}.",
            "This {noun} recipe serves {num_small} people and takes about {num} minutes.",
        ),
        "questions": (
            "How do I {verb_base} {a_noun} without a {noun}?",
            "What can I cook with {a_noun}, {a_noun} and some {noun}?",
            "Give me a quick recipe for {a_adj} {noun} soup.",
            "Why does my {noun} always turn out {adj}?",
            "How long should I {verb_base} the {noun}?",
        ),
    },
    "code": {
        "noun": _words(
            "function variable list dictionary loop string integer array class method module package "
            "test compiler parser server request response database query index cache thread process "
            "file buffer iterator generator decorator exception"
        ),
        "verb": _words("return parse sort filter compile cache store validate iterate call import log retry"),
        "unit": ("milliseconds", "bytes", "requests", "lines", "rows"),
        "templates": (
            "The {noun} {verb} {a_noun} before the {noun} is called.",
            "{connector} you should {verb_base} the {noun} inside {a_adj} {noun}.",
            "Use `{ident}()` to {verb_base} the {noun} and keep the {noun} {adj}.",
            "A {adj} {noun} can handle about {num} {unit} per second on one core.",
            "If the {noun} is empty, `{ident}` raises an exception with code {num_small}.",
            "The test suite has {num} cases, and {num_small} of them check the {noun}.",
            "Refactoring the {noun} made the {noun} {dec} times faster.",
            "Remember that every {noun} must {verb_base} the {noun} exactly once.",
        ),
        "questions": (
            "How do I {verb_base} {a_noun} in Python?",
            "Why does my {noun} fail when the {noun} is empty?",
            "Write a function that can {verb_base} a list of numbers.",
            "What is the difference between {a_noun} and {a_noun}?",
            "Can you review this {noun} and suggest a fix?",
        ),
    },
    "travel": {
        "noun": _words(
            "train bus flight ticket hotel hostel museum market beach mountain castle harbor station "
            "passport map guide bridge village island valley café ferry trail lake cathedral garden"
        ),
        "verb": _words("visit book explore reach cross rent photograph plan pack"),
        "unit": ("hours", "kilometers", "days", "euros"),
        "templates": (
            "The {noun} from {place} to {place} takes about {num_small} hours and costs around €{price}.",
            "In {place}, the {adj} {noun} is open from {hour}:00 to {hour2}:30 every day.",
            "{connector} many travelers {verb_base} the {noun} early in the morning to avoid crowds.",
            "We spent {num_small} days in {place} and loved the {adj} {noun} near the {noun}.",
            "Bring {a_noun} and a warm jacket, because the {noun} can be {adj} in {month}.",
            "A day pass for the {noun} costs €{price}, which is {adj} for {place}.",
            "The best time to {verb_base} the {noun} is in {month}, when it is {temp_c}°C outside.",
        ),
        "questions": (
            "What should I see in {place} if I only have {num_small} days?",
            "How do I get from {place} to {place} by {noun}?",
            "Is {place} expensive in {month}?",
            "Can you plan a {num_small}-day trip to {place}?",
            "Where can I {verb_base} {a_noun} in {place}?",
        ),
    },
    "history": {
        "noun": _words(
            "empire kingdom treaty revolution city wall army ship trade route library temple harbor "
            "coin manuscript republic council dynasty colony canal"
        ),
        "verb": _words("build defend sign control expand collapse record conquer unite rebuild"),
        "unit": ("years", "soldiers", "ships", "kilometers"),
        "templates": (
            "In {year}, the {noun} began to {verb_base} the {noun} along the coast.",
            "Historians believe the {adj} {noun} lasted about {num} years.",
            "{connector} the {noun} {verb} {a_noun} that changed the region for centuries.",
            "The {noun} of {Name} was famous for its {adj} {noun}.",
            "Around {num} people lived inside the {noun} at its peak.",
        ),
        "questions": (
            "Why did the {noun} {verb_base} the {noun}?",
            "What was life like in {a_adj} {noun} around {year}?",
            "Summarize the history of the {noun} of {Name}.",
        ),
    },
    "health": {
        "noun": _words(
            "sleep exercise diet muscle heart lung vitamin protein habit stress posture hydration walk "
            "stretch breakfast routine"
        ),
        "verb": _words("improve reduce support strengthen balance track schedule"),
        "unit": ("minutes", "hours", "liters", "steps"),
        "templates": (
            "A short {noun} of {num_small} minutes can {verb_base} your {noun}.",
            "Most adults need about {num_small} hours of sleep and {dec} liters of water a day.",
            "{connector} a {adj} {noun} helps to {verb_base} the {noun}.",
            "Try to walk {num} steps after each meal to {verb_base} your {noun}.",
        ),
        "questions": (
            "How can I {verb_base} my {noun}?",
            "Is {a_adj} {noun} good for the {noun}?",
            "What is a simple {noun} plan for beginners?",
        ),
    },
    "everyday": {
        "noun": _words(
            "neighbor kitchen window garden bicycle letter meeting weekend holiday birthday umbrella "
            "blanket library teacher student parent friend colleague manager customer office schedule "
            "budget invoice apartment landlord elevator staircase balcony laundry grocery receipt "
            "appointment dentist doctor pharmacy prescription notebook pencil calendar deadline "
            "presentation spreadsheet password account printer keyboard charger headphone backpack "
            "wallet jacket sweater furniture carpet curtain ladder hammer screwdriver bucket sponge "
            "detergent recycling compost newspaper magazine podcast documentary orchestra rehearsal "
            "tournament championship volunteer committee festival ceremony invitation conversation "
            "argument apology compliment suggestion opinion decision experience memory habit hobby "
            "instrument painting photograph souvenir postcard envelope package delivery courier"
        ),
        "verb": _words(
            "organize remember forget borrow return repair clean prepare finish postpone cancel "
            "confirm recommend compare describe discuss negotiate celebrate practice improve replace "
            "arrange deliver schedule remind encourage"
        ),
        "unit": ("minutes", "hours", "days", "weeks", "dollars", "pages"),
        "templates": (
            "My {noun} asked me to {verb_base} the {noun} before the {noun} on {weekday}.",
            "{connector} it is easier to {verb_base} the {noun} if you write everything in a {noun}.",
            "We usually {verb_base} {a_noun} every {weekday}, which takes about {num_small} {unit}.",
            "The {noun} was {adj}, so {person} decided to {verb_base} the {noun} instead.",
            "{person} and {person} spent {num_small} hours trying to {verb_base} the old {noun}.",
            "Please {verb_base} the {noun} and send the {noun} to {person} by {weekday}.",
            "A {adj} {noun} can make {a_noun} feel much less stressful.",
            "Last {month}, the {noun} cost {num} dollars, but this year it is {adv} cheaper.",
        ),
        "questions": (
            "How do I politely {verb_base} {a_noun} with my {noun}?",
            "What is the best way to {verb_base} {a_noun} on a small budget?",
            "My {noun} keeps breaking. Should I {verb_base} it or buy a new one?",
            "Can you help me {verb_base} a {noun} for {person}?",
            "Any tips to {verb_base} my {noun} before {weekday}?",
        ),
    },
}
WEEKDAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = _words("January February March April May June July August September October November December")
CODE_WORDS = _words(
    "data item value count total result user order price name index key node path score line token "
    "batch record config buffer cache size limit offset queue event"
)
SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a concise assistant. Answer in a few sentences.",
    "You are an expert chef who explains recipes step by step.",
    "You are a patient math tutor. Show your work.",
    "You are a senior software engineer. Prefer short, correct code.",
    "You are a friendly travel guide.",
    "You are a science teacher for curious teenagers.",
    "You are a helpful assistant. Think before you answer.",
)
