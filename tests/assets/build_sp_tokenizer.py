"""Build the SentencePiece-style test tokenizer (fully offline, deterministic).

Run from the repository root::

    .venv/bin/python tests/assets/build_sp_tokenizer.py

Output (committed): ``tests/assets/sp_tokenizer/``, a BPE tokenizer of the Llama-2 / Mistral kind, as
opposed to the byte-level demo tokenizer:

* Metaspace pre-tokenization (a space becomes ``▁``, one ``▁`` is prepended to the text), no byte-level
  alphabet;
* byte fallback: the 256 byte tokens ``<0x00>`` .. ``<0xFF>`` are ordinary vocabulary entries (ids
  4..259), so a character outside the trained alphabet (emoji, most CJK) encodes as its UTF-8 bytes;
* ``<unk>`` (id 0), ``<s>``/``</s>`` and the pad token, plus the ChatML and media control tokens of
  ``cook.format.CONTROL_TOKENS``, all as special added tokens.

It is trained on the demo corpus (``build_demo_assets.corpus_documents``, same seed) with a small
alphabet, so that byte fallback is exercised by ordinary test text too.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ASSETS = Path(__file__).resolve().parent
sys.path.insert(0, str(ASSETS))
sys.path.insert(0, str(ASSETS.parent.parent))

from demo_assets.common import CORPUS_SEED, MODEL_MAX_LENGTH  # noqa: E402
from demo_assets.tokenizer import added_tokens_decoder, corpus_documents  # noqa: E402

from cook.format import CONTROL_TOKENS  # noqa: E402

OUT_DIR = ASSETS / "sp_tokenizer"
VOCAB_SIZE = 4096
ALPHABET_LIMIT = 120
UNK, BOS, EOS, PAD = "<unk>", "<s>", "</s>", "<pad>"
LEADING = (UNK, BOS, EOS, PAD)  # ids 0..3, then the byte tokens, then the trained pieces
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))
SPECIAL_TOKENS = (*LEADING, *CONTROL_TOKENS)


def train() -> dict:
    """Train the pieces, then lay out the vocabulary Llama-style: specials, 256 byte tokens, pieces."""
    docs = list(corpus_documents(random.Random(CORPUS_SEED), 20000))
    tok = Tokenizer(models.BPE(unk_token=UNK, byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(BYTE_TOKENS) - len(CONTROL_TOKENS),
        min_frequency=2,
        special_tokens=list(LEADING),
        limit_alphabet=ALPHABET_LIMIT,
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    data = json.loads(tok.to_str())
    trained = sorted(data["model"]["vocab"].items(), key=lambda item: item[1])
    pieces = [piece for piece, _ in trained if piece not in LEADING]
    ordered = [*LEADING, *BYTE_TOKENS, *pieces, *CONTROL_TOKENS]
    assert len(set(ordered)) == len(ordered), "a trained piece collides with a byte or control token"
    vocab = {piece: i for i, piece in enumerate(ordered)}
    data["model"]["vocab"] = vocab
    data["added_tokens"] = [
        {
            "id": vocab[t],
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t in SPECIAL_TOKENS
    ]
    data["decoder"] = json.loads(
        decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        ).__getstate__()
    )
    return data


def write(data: dict) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    Tokenizer.from_str(text)  # it loads
    (OUT_DIR / "tokenizer.json").write_text(text, encoding="utf-8")
    vocab = data["model"]["vocab"]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MODEL_MAX_LENGTH,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "additional_special_tokens": list(CONTROL_TOKENS),
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "padding_side": "right",
        "added_tokens_decoder": added_tokens_decoder({t: vocab[t] for t in SPECIAL_TOKENS}),
    }
    (OUT_DIR / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    data = train()
    assert len(data["model"]["vocab"]) == VOCAB_SIZE, len(data["model"]["vocab"])
    write(data)
    print(f"wrote {OUT_DIR} (vocab {VOCAB_SIZE}, byte tokens at ids 4..259)")


if __name__ == "__main__":
    main()
