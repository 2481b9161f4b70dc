import pytest

from bench.run_all import BENCHES, KEPT, RESULTS, _sections


def test_every_block_of_the_committed_results_is_closed_and_known() -> None:
    sections = _sections(RESULTS.read_text())
    assert set(sections) <= {*BENCHES, *KEPT}
    assert "bench_driver_real" in sections


@pytest.mark.parametrize(
    "text",
    [
        "<!-- bench_a -->\nx\n<!-- bench_b -->\ny\n<!-- /bench_b -->\n",
        "<!-- bench_a -->\nx\n<!-- /bench_a -->\n<!-- bench_a -->\ny\n<!-- /bench_a -->\n",
    ],
)
def test_a_block_left_open_or_repeated_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"RESULTS\.md"):
        _sections(text)
