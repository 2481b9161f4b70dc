"""The demo tokenizer: a byte-level BPE trained on a synthetic corpus, written with its config files."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from .chat_template import CHAT_TEMPLATE
from .common import CORPUS_SEED, EOS_TOKEN, MODEL_MAX_LENGTH, PAD_TOKEN, SPECIAL_TOKENS, TOKENIZER_DIR, VOCAB_SIZE
from .vocabulary import CODE_WORDS, TOPICS
from .words import math_problem, other_snippet, pseudo_name, python_snippet, question, sentence, structured_answer


# ----------------------------------------------------------------------------------------------------
# Tokenizer corpus and training.
# ----------------------------------------------------------------------------------------------------
def corpus_documents(rng: random.Random, n_docs: int) -> Iterator[str]:
    topics = sorted(TOPICS)
    for _ in range(n_docs):
        topic = rng.choice(topics)
        r = rng.random()
        if r < 0.12:
            q, reason, ans = math_problem(rng)
            yield f"{q}\n{reason}\n{ans}"
        elif r < 0.22:
            yield python_snippet(rng) if rng.random() < 0.6 else other_snippet(rng)
        elif r < 0.35:
            yield question(rng, topic) + "\n\n" + structured_answer(rng, topic, rng.randint(2, 8))
        elif r < 0.45:
            names = [pseudo_name(rng) for _ in range(rng.randint(3, 8))]
            yield "\n".join(f"- **{n}**: " + sentence(rng, topic) for n in names)
        elif r < 0.50:
            yield json.dumps(
                {"id": rng.randint(1, 10**6), "name": pseudo_name(rng), "tags": [rng.choice(CODE_WORDS)]},
                ensure_ascii=False,
            )
        else:
            yield structured_answer(rng, topic, rng.randint(3, 12))


def build_tokenizer() -> Tokenizer:
    rng = random.Random(CORPUS_SEED)
    docs = list(corpus_documents(rng, 20000))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = None
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    return tok


def added_tokens_decoder(ids: dict[str, int]) -> dict[str, dict[str, object]]:
    """``tokenizer_config.json``'s ``added_tokens_decoder``: each token (content -> id) special, unstripped."""
    flags = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    return {str(i): {"content": t, **flags} for t, i in ids.items()}


def dump_json(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def write_tokenizer(tok: Tokenizer) -> None:
    TOKENIZER_DIR.mkdir(parents=True, exist_ok=True)
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, (t, tok.token_to_id(t))
    # Re-serialise through json so the bytes do not depend on the tokenizers pretty-printer.
    data = json.loads(tok.to_str())
    (TOKENIZER_DIR / "tokenizer.json").write_text(
        json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8"
    )
    extra = [t for t in SPECIAL_TOKENS if t not in (PAD_TOKEN, EOS_TOKEN)]
    added = added_tokens_decoder({t: i for i, t in enumerate(SPECIAL_TOKENS)})
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MODEL_MAX_LENGTH,
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "additional_special_tokens": extra,
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "padding_side": "right",
        "added_tokens_decoder": added,
        "chat_template": CHAT_TEMPLATE,
    }
    (TOKENIZER_DIR / "tokenizer_config.json").write_text(dump_json(config), encoding="utf-8")
    special_map = {"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN, "additional_special_tokens": extra}
    (TOKENIZER_DIR / "special_tokens_map.json").write_text(dump_json(special_map), encoding="utf-8")
