"""Synthetic English-like text from the word lists: sentences, questions, code, math and reasoning."""

from __future__ import annotations

import random
import re

from .vocabulary import ADJECTIVES, ADVERBS, CODE_WORDS, CONNECTORS, MONTHS, PEOPLE, PLACES, SYLLABLES, TOPICS, WEEKDAYS


def a_an(word: str) -> str:
    return ("an " if word[0].lower() in "aeiou" else "a ") + word


def third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def pseudo_name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def identifier(rng: random.Random) -> str:
    words = [rng.choice(CODE_WORDS) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        return words[0] + "".join(w.capitalize() for w in words[1:])
    return "_".join(words)


def fill(rng: random.Random, topic: str, template: str) -> str:
    spec = TOPICS[topic]

    def slot(m: re.Match[str]) -> str:
        name = m.group(1)
        cap = name[0].isupper() and name not in ("Name",)
        key = name[0].lower() + name[1:] if cap else name
        value: str
        if key == "noun":
            value = rng.choice(spec["noun"])
        elif key == "a_noun":
            value = a_an(rng.choice(spec["noun"]))
        elif key == "adj":
            value = rng.choice(ADJECTIVES)
        elif key == "a_adj":
            value = a_an(rng.choice(ADJECTIVES))
        elif key == "verb":
            value = third_person(rng.choice(spec["verb"]))
        elif key == "verb_base":
            value = rng.choice(spec["verb"])
        elif key == "adv":
            value = rng.choice(ADVERBS)
        elif key == "connector":
            value = rng.choice(CONNECTORS)
        elif key == "num":
            value = str(rng.randint(2, 999))
        elif key == "num_small":
            value = str(rng.randint(2, 12))
        elif key == "dec":
            value = f"{rng.uniform(0.1, 99.9):.{rng.randint(1, 2)}f}"
        elif key == "year":
            value = str(rng.randint(1200, 2023))
        elif key == "Name":
            value = pseudo_name(rng)
        elif key == "unit":
            value = rng.choice(spec["unit"])
        elif key == "place":
            value = rng.choice(PLACES)
        elif key == "price":
            value = str(rng.randint(3, 240))
        elif key in ("hour", "hour2"):
            value = f"{rng.randint(6, 11) if key == 'hour' else rng.randint(17, 22):02d}"
        elif key == "month":
            value = rng.choice(MONTHS)
        elif key == "weekday":
            value = rng.choice(WEEKDAYS)
        elif key == "person":
            value = rng.choice(PEOPLE) if rng.random() < 0.7 else pseudo_name(rng)
        elif key == "temp":
            value = str(rng.choice((160, 170, 180, 190, 200, 220)))
        elif key == "temp_c":
            value = str(rng.randint(-5, 34))
        elif key == "ident":
            value = identifier(rng)
        else:
            raise KeyError(name)
        return value[0].upper() + value[1:] if cap else value

    text = re.sub(r"\{(\w+)\}", slot, template)
    return text[0].upper() + text[1:]


def sentence(rng: random.Random, topic: str) -> str:
    return fill(rng, topic, rng.choice(TOPICS[topic]["templates"]))


def question(rng: random.Random, topic: str) -> str:
    q = fill(rng, topic, rng.choice(TOPICS[topic]["questions"]))
    r = rng.random()
    if r < 0.25:
        q = fill(rng, topic, rng.choice(TOPICS[topic]["templates"])) + " " + q
    elif r < 0.35:
        q = q + " Please keep it short."
    elif r < 0.45:
        q = f"I'm visiting {rng.choice(PLACES)} next week. " + q
    return q


def paragraph(rng: random.Random, topic: str, n: int) -> str:
    return " ".join(sentence(rng, topic) for _ in range(n))


def python_snippet(rng: random.Random) -> str:
    fname = identifier(rng).lower()
    arg = rng.choice(CODE_WORDS) + "s"
    var = rng.choice(("x", "item", "value", "row", "n"))
    k, m = rng.randint(2, 9), rng.randint(2, 20)
    kind = rng.randrange(4)
    if kind == 0:
        body = (
            f"def {fname}({arg}: list[int]) -> int:\n"
            f'    """Return the weighted sum of the {arg} divisible by {k}."""\n'
            f"    total = 0\n"
            f"    for {var} in {arg}:\n"
            f"        if {var} % {k} == 0:\n"
            f"            total += {var} * {m}\n"
            f"    return total\n"
        )
    elif kind == 1:
        body = (
            f"def {fname}(path: str) -> dict[str, int]:\n"
            f"    counts: dict[str, int] = {{}}\n"
            f'    with open(path, encoding="utf-8") as f:\n'
            f"        for line in f:\n"
            f"            for word in line.split():\n"
            f"                counts[word] = counts.get(word, 0) + 1\n"
            f"    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:{m}])\n"
        )
    elif kind == 2:
        body = (
            f"class {fname.title().replace('_', '')}:\n"
            f"    def __init__(self, limit: int = {m * 10}) -> None:\n"
            f"        self.limit = limit\n"
            f"        self.items: list[str] = []\n\n"
            f"    def add(self, {var}: str) -> bool:\n"
            f"        if len(self.items) >= self.limit:\n"
            f"            return False\n"
            f"        self.items.append({var})\n"
            f"        return True\n"
        )
    else:
        body = (
            f"import json\n\n\n"
            f"def {fname}(raw: str) -> list[dict]:\n"
            f"    records = []\n"
            f"    for i, line in enumerate(raw.splitlines(), start=1):\n"
            f"        try:\n"
            f"            records.append(json.loads(line))\n"
            f"        except json.JSONDecodeError as exc:\n"
            f'            print(f"line {{i}}: {{exc}}")\n'
            f"    return records[:{m}]\n"
        )
    return "```python\n" + body + "```"


def other_snippet(rng: random.Random) -> str:
    kind = rng.randrange(3)
    table = rng.choice(CODE_WORDS) + "s"
    if kind == 0:
        return (
            "```sql\n"
            f"SELECT {rng.choice(CODE_WORDS)}, COUNT(*) AS n\n"
            f"FROM {table}\n"
            f"WHERE {rng.choice(CODE_WORDS)}_id > {rng.randint(1, 500)}\n"
            f"GROUP BY 1\nORDER BY n DESC\nLIMIT {rng.randint(5, 50)};\n"
            "```"
        )
    if kind == 1:
        return (
            "```bash\n"
            f"mkdir -p out/{table}\n"
            f"python -m {identifier(rng).lower()} --input data/{table}.jsonl --workers {rng.randint(2, 32)}\n"
            f"ls -lh out/{table} | head -n {rng.randint(3, 20)}\n"
            "```"
        )
    fname = identifier(rng)
    return (
        "```javascript\n"
        f"function {fname}(items) {{\n"
        f"  return items.filter((x) => x.{rng.choice(CODE_WORDS)} > {rng.randint(0, 100)})\n"
        f"    .map((x) => ({{ ...x, score: x.score * {rng.randint(2, 9)} }}));\n"
        "}\n"
        "```"
    )


def math_problem(rng: random.Random) -> tuple[str, str, str]:
    """(question, reasoning, answer) with correct arithmetic."""
    kind = rng.randrange(4)
    if kind == 0:
        a, b = rng.randint(12, 999), rng.randint(11, 99)
        q = f"What is {a} * {b}?"
        r = (
            f"I need {a} * {b}. Split {b} into {b // 10 * 10} + {b % 10}. "
            f"{a} * {b // 10 * 10} = {a * (b // 10 * 10)}, and {a} * {b % 10} = {a * (b % 10)}. "
            f"Adding them: {a * (b // 10 * 10)} + {a * (b % 10)} = {a * b}."
        )
        return q, r, f"{a} × {b} = **{a * b}**."
    if kind == 1:
        x, a, c = rng.randint(-20, 30), rng.randint(2, 12), rng.randint(-50, 50)
        b = a * x + c
        q = f"Solve for x: {a}x + {c} = {b}".replace("+ -", "- ")
        r = f"Subtract {c} from both sides: {a}x = {b - c}. Divide by {a}: x = {x}. "
        r += f"Check: {a}*{x} + {c} = {b}."
        return q, r, f"x = {x}"
    if kind == 2:
        p, total = rng.randint(5, 95), rng.randint(20, 2000)
        q = f"What is {p}% of {total}?"
        val = p * total / 100
        r = f"{p}% means {p}/100. {total} * {p} = {total * p}. Divide by 100: {val:g}."
        return q, r, f"{p}% of {total} is {val:g}."
    n = rng.randint(3, 12)
    nums = [rng.randint(1, 100) for _ in range(n)]
    q = f"Find the mean and the maximum of these numbers: {', '.join(map(str, nums))}."
    r = (
        f"There are {n} numbers. Their sum is {' + '.join(map(str, nums))} = {sum(nums)}. "
        f"Mean = {sum(nums)} / {n} = {sum(nums) / n:.3f}. The largest value is {max(nums)}."
    )
    return q, r, f"Mean: {sum(nums) / n:.3f}\nMaximum: {max(nums)}"


def structured_answer(rng: random.Random, topic: str, size: int) -> str:
    """A markdown-ish answer: paragraphs, sometimes a list, sometimes code. ``size`` ~ number of sentences."""
    parts: list[str] = [paragraph(rng, topic, rng.randint(1, 3))]
    left = max(0, size - 2)
    while left > 0:
        r = rng.random()
        if r < 0.2:
            items = rng.randint(2, 5)
            numbered = rng.random() < 0.5
            lines = [
                f"{i + 1}. " + sentence(rng, topic) if numbered else "- " + sentence(rng, topic) for i in range(items)
            ]
            parts.append("\n".join(lines))
            left -= items
        elif r < 0.3 and topic == "code":
            parts.append(python_snippet(rng) if rng.random() < 0.7 else other_snippet(rng))
            left -= 3
        elif r < 0.35 and topic == "cooking":
            ings = rng.sample(TOPICS["cooking"]["noun"][:30], rng.randint(3, 6))
            lines = [f"- {rng.randint(1, 500)} {rng.choice(TOPICS['cooking']['unit'])} {x}" for x in ings]
            parts.append("**Ingredients**\n" + "\n".join(lines))
            left -= 2
        elif r < 0.4:
            parts.append(f"## {fill(rng, topic, '{Adj} {noun}')}\n\n" + paragraph(rng, topic, rng.randint(2, 4)))
            left -= 3
        else:
            n = min(left, rng.randint(2, 5))
            parts.append(paragraph(rng, topic, n))
            left -= n
    return "\n\n".join(parts)


def reasoning_text(rng: random.Random, topic: str, user: str, size: int) -> str:
    opener = rng.choice(
        (
            f'The user asks: "{user[:80]}". ',
            "Let me think about what is being asked. ",
            "Okay, so the question is about " + rng.choice(TOPICS[topic]["noun"]) + ". ",
            "First I should figure out the key facts. ",
        )
    )
    plan = rng.choice(
        (
            "I will start with a short summary, then give details.",
            "A list of steps would be clearest here.",
            "I should keep the answer short and practical.",
            "Maybe an example will help.",
        )
    )
    return opener + paragraph(rng, topic, size) + " " + plan
