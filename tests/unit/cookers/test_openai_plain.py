"""The unchecked shortcut for plain OpenAI messages (string or text-part content, optional
``reasoning_content``) gives exactly the checked path's turn, and
declines (None) every message the checked path must look at."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cook.cookers.openai import _plain_turn, _turn
from cook.errors import Rejected

values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.lists(st.text(max_size=3), max_size=2)
)
parts = st.lists(
    st.one_of(
        values,
        st.dictionaries(
            st.sampled_from(["type", "text", "image"]),
            st.one_of(values, st.sampled_from(["text", "image", "x.jpg"])),
            max_size=3,
        ),
    ),
    max_size=3,
)
messages = st.dictionaries(
    st.sampled_from(["role", "content", "loss", "reasoning_content", "tool_calls"]),
    st.one_of(values, parts, st.sampled_from(["user", "assistant", "system", "tool", "bot"])),
    max_size=4,
)


@settings(max_examples=500)
@given(message=st.one_of(messages, values))
def test_plain_turn_is_the_checked_turn_or_none(message) -> None:
    plain = _plain_turn(message)
    try:
        checked = _turn(message, "messages[0]", [])
    except Rejected:
        assert plain is None
        return
    assert plain is None or plain == checked


def test_plain_turn_takes_the_common_message() -> None:
    turn = _plain_turn({"role": "user", "content": "Hi"})
    assert turn is not None and turn == _turn({"role": "user", "content": "Hi"}, "messages[0]", [])
    assert _plain_turn({"role": "user", "content": "Hi", "loss": False}) is None
    assert _plain_turn({"role": "user", "content": ""}) is None
    for message in (
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": ""}]},
        {"role": "assistant", "content": "Hi", "reasoning_content": "think"},
        {"role": "assistant", "content": "", "reasoning_content": "think"},
        {"role": "assistant", "content": [], "reasoning_content": "think"},
    ):
        turn = _plain_turn(message)
        assert turn is not None and turn == _turn(message, "messages[0]", [])
    assert _plain_turn({"role": "user", "content": [{"type": "image", "image": "a.jpg"}]}) is None
    assert _plain_turn({"role": "user", "content": [{"type": "text", "text": "Hi", "x": 1}]}) is None
