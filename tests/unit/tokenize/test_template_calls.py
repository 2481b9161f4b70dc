"""``template_calls.insertion``: the one string that a render has and another has not."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from cook.tokenize.template_calls import common_prefix, insertion

CONTROLS = re.compile("(<\\|eot\\|>|\\[/INST\\])")
TEXT = st.lists(st.sampled_from(["a", "b", "\n", " ", "<|eot|>", "[/INST]", "{"]), max_size=8).map("".join)


@given(bare=TEXT, extra=TEXT.filter(bool), at=st.integers(0, 100))
def test_the_insertion_is_found_and_cuts_no_control_token(bare: str, extra: str, at: int) -> None:
    pieces = CONTROLS.split(bare)
    bounds = [0]
    for piece in pieces:
        bounds.append(bounds[-1] + len(piece))
    at = bounds[at % len(bounds)]  # an insertion between tokens, as a template writes one
    rendered = bare[:at] + extra + bare[at:]
    cut = insertion(rendered, bare, CONTROLS)
    assert cut is not None
    start, stop = cut
    assert stop - start == len(extra) and rendered[:start] + rendered[stop:] == bare
    inside = {i for m in CONTROLS.finditer(rendered) for i in range(m.start() + 1, m.end())}
    assert start not in inside and stop not in inside


def test_the_latest_place_keeps_shared_markup_before_it() -> None:
    bare = "[/INST]</s>"
    rendered = "[/INST][TOOL_CALLS][{}]</s>"
    assert insertion(rendered, bare, CONTROLS) == (7, 7 + len("[TOOL_CALLS][{}]"))
    assert insertion("ab", "abc", None) is None and insertion("xyz", "abc", None) is None
    assert common_prefix("abcd", "abx") == 2 and common_prefix("", "a") == 0
