"""Run the benchmarks and (re)write bench/RESULTS.md.

    python -m bench.run_all                 # every benchmark
    python -m bench.run_all bench_packing   # only that section; the others are kept as they are

Each benchmark module ``bench/bench_<name>.py`` has ``run() -> str`` returning one markdown section
(a heading, the command that reproduces it, a table of medians and ratios against a baseline
measured in the same run).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

BENCHES = [
    "bench_text_cook",
    "bench_packing",
    "bench_scale",
    "bench_validate",
    "bench_media",
    "bench_job",
    "bench_ceiling",
    "bench_plan",
    "bench_inspect_html",
    "bench_text_fast",
    "bench_text_varied",
    "bench_template",
    "bench_reader",
    "bench_repack",
    "bench_driver",
    "bench_driver_real",
    "bench_units",
    "bench_stage",
]
KEPT = ["bench_gpu_decode"]  # measured on a lent GPU (the module prints JSON there); kept as written, never run here
RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = (
    "# cook benchmarks\n\n"
    "Written by `make bench` (`python -m bench.run_all`). Every figure is a median over repeats and a\n"
    "ratio against a baseline measured in the same run on the same machine.\n"
)


def _sections(text: str) -> dict[str, str]:
    """Each benchmark's block of RESULTS.md; a block opened and never closed is an error, not a loss."""
    found = dict(re.findall(r"<!-- (bench_\w+) -->\n(.*?)<!-- /\1 -->\n", text, flags=re.S))
    opened = re.findall(r"<!-- (bench_\w+) -->", text)
    unclosed = sorted(set(opened) - set(found))
    if unclosed or len(opened) != len(found):
        raise ValueError(f"RESULTS.md: block(s) not closed or repeated: {', '.join(unclosed) or 'a repeated name'}")
    return found


def main(argv: list[str]) -> int:
    names = argv or BENCHES
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    sections = _sections(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in names:
        print(f"running {name} ...", file=sys.stderr)
        sections[name] = importlib.import_module(f"bench.{name}").run().rstrip() + "\n"
        body = HEADER + "".join(
            f"\n<!-- {n} -->\n{sections[n]}<!-- /{n} -->\n" for n in [*BENCHES, *KEPT] if n in sections
        )
        RESULTS.write_text(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
