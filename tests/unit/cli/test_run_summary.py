"""``cook run``'s report: the summary table adds up to packs x seq_len (tail padding beside pad-multiple
padding), shows the packing efficiency and the stored fill by their rules, truncation is shown and warned about above 1%, and a run that packed nothing is one line."""

from __future__ import annotations

import pytest

from cook.cli.run_cmd import nothing_packed, summary_table, tail_padding, truncation_warning
from cook.config import config_from_dict
from cook.runner.pipeline import RunSummary

COUNTS = {
    "records_in": 300,
    "sources_packed": 288,
    "records_rejected": 12,
    "packs": 10,
    "tokens": 2000,
    "target_tokens": 900,
    "padding_tokens": 40,
    "truncated_sequences": 276,
    "truncated_tokens": 101_000,
}


def _summary(**counts: int) -> RunSummary:
    return RunSummary(
        out_dir="/o",
        counts={**COUNTS, **counts},
        packing_efficiency=0.78,
        rejects_by_reason={"bad_json": 7, "too_long": 5},
        shards=3,
        seconds=2.0,
    )


def _row(table: str, name: str) -> str:
    (line,) = [line for line in table.splitlines() if line.startswith(name + " ")]
    return line[len(name) :].strip()


def test_tail_padding_makes_the_numbers_add_up() -> None:
    summary = _summary()
    table = summary_table(summary, seq_len=256)
    assert tail_padding(summary, 256) == 10 * 256 - 2000 - 40 == 520
    tokens, padding, tail, whole = (
        int(_row(table, name).split()[0].replace(",", ""))
        for name in ("tokens", "padding tokens", "tail padding", "packs x seq_len")
    )
    assert (tokens, padding, tail, whole) == (2000, 40, 520, 2560) and tokens + padding + tail == whole


def test_packing_efficiency_and_stored_fill_rows() -> None:
    table = summary_table(_summary(), seq_len=256)
    assert _row(table, "packing efficiency") == "78.12% (tokens / (packs × seq_len))"  # 2000 / 2560
    assert _row(table, "stored fill") == "98.04% (tokens / stored tokens)"  # 2000 / 2040


def test_truncation_rows_and_counts_without_them() -> None:
    table = summary_table(_summary(), seq_len=256)
    assert _row(table, "truncated sequences").startswith("276") and _row(table, "truncated tokens") == "101,000"
    older = _summary()
    del older.counts["truncated_sequences"], older.counts["truncated_tokens"]
    assert _row(summary_table(older, seq_len=256), "truncated sequences").startswith("0")


@pytest.mark.parametrize(("truncated", "warned"), [(0, False), (2, False), (3, True), (276, True)])
def test_truncation_warning_above_one_percent(truncated: int, warned: bool) -> None:
    warning = truncation_warning({**COUNTS, "truncated_sequences": truncated}, seq_len=256)
    assert (warning is not None) == warned  # 2 of 288 is 0.7%, 3 is 1.04%
    if warning:
        assert warning.startswith("cook: warning: ") and "\n" not in warning
        assert f"{truncated} of 288 packed records" in warning and "packing.seq_len=256" in warning
    assert truncation_warning({"sources_packed": 0}, 256) is None


def test_nothing_packed_names_the_top_reasons() -> None:
    config = config_from_dict({"input": {"path": "in.jsonl"}, "tokenizer": {"path": "tok"}})
    summary = _summary(packs=0, sources_packed=0, records_rejected=1290)
    summary.rejects_by_reason = {"bad_role": 3, "bad_json": 1272, "too_long": 3, "bad_utf8": 12}
    line = nothing_packed(summary, config)
    assert line.startswith("no record was packed: 1290 rejected (top reasons: bad_json 1272, bad_utf8 12, bad_role 3)")
    assert "rejects.jsonl" in line and "\n" not in line
    empty = _summary(packs=0, sources_packed=0, records_rejected=0, records_in=0)
    empty.rejects_by_reason = {}
    assert "the input held no records" in nothing_packed(empty, config)


def test_run_json_is_the_summary(tmp_path, capsys) -> None:
    import json

    from cook.cli.main import main

    assert (
        main(["run", "pipelines/demo.yaml", "--output", str(tmp_path / "o"), "--workers", "0", "--quiet", "--json"])
        == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert body["counts"]["records_in"] == body["counts"]["sources_packed"] + body["counts"]["records_rejected"]
    assert body["shards"] >= 2 and body["driver_received_bytes"] == 0  # in-process: nothing crosses
