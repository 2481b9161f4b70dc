"""What the page needs of a tokenizer: ``decode`` and which ids are control tokens (drawn as chips).

``from_tokenizer`` takes a ``transformers`` tokenizer (duck-typed: nothing here imports transformers);
``from_ids`` is the fallback when none loads: control ids from the manifest, ids shown as numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cook import format as fmt


@dataclass(frozen=True, slots=True)
class TokenView:
    decode: Callable[[list[int]], str]  # ids -> text, special tokens kept
    controls: Mapping[int, str] = field(default_factory=dict)  # id -> token text, drawn as a chip
    pad_id: int | None = None
    separator: str = ""  # after a token run written by name (``<image>×80``): " " where ``decode`` spaces its ids


def from_tokenizer(tokenizer: Any) -> TokenView:
    """Chips for cook's control tokens, the pad token and every special token the tokenizer declares."""
    names = [*fmt.CONTROL_TOKENS, fmt.PAD_TOKEN, *getattr(tokenizer, "all_special_tokens", [])]
    names += [
        t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)
    ]
    controls: dict[int, str] = {}
    for name in names:
        found = tokenizer.convert_tokens_to_ids(name)
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            controls.setdefault(found, name)
    pad_id = tokenizer.pad_token_id if isinstance(tokenizer.pad_token_id, int) else None

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))

    return TokenView(decode=decode, controls=controls, pad_id=pad_id)


def from_ids(control_ids: Mapping[str, int], pad_id: int | None) -> TokenView:
    """No tokenizer: text shown as token ids, control tokens by name (recognised by id)."""
    controls = {int(i): name for name, i in control_ids.items()}
    if pad_id is not None:
        controls.setdefault(pad_id, fmt.PAD_TOKEN)

    def decode(ids: list[int]) -> str:
        return "".join(f"{controls.get(i, i)} " for i in ids)

    return TokenView(decode=decode, controls=controls, pad_id=pad_id, separator=" ")
