"""``cook run PIPELINE.yaml [--input] [--output] [--set k=v ...] [--ray-address] [--workers auto|N] [--overwrite]``.

The executor: ``--workers 0`` cooks in-process, ``--workers N`` starts N Ray actors, and a Ray address
(``--ray-address`` or ``ray.address``) joins that cluster. ``--workers auto`` (the default) reads the
unit plan first: a job of one work unit, or of less than ``AUTO_RAY_MIN_BYTES`` of input, cooks
in-process (Ray's start-up would outlast it), any other starts the embedded Ray with
``ray.num_actors`` actors. One stderr line says which and why. The shards are the same bytes either way.

Before any work: the pipeline is validated (``cook.config``), checked against the machine
(``cook.cli.preflight``: media paths, tokenizer, output directory) and, with ``--ray-address``, the
cluster is joined (``cook.runner.ray_connect``: bounded, one line when it cannot be). A problem in
any of them is exit 2 with one line, before the output directory is touched.

After the run: the summary table on stdout; on stderr a warning when more than 1% of the packed
records were truncated, and, when nothing was packed, exit 1 with one line naming the top reject
reasons (the rejects and the manifest are written, so the user can see why).

A rerun of a run that finished (same cook version, pipeline, input files and tokenizer files)
changes nothing: one line on stdout says so (``--json``: the stored summary with
``"already_finished": true``), exit 0 (1 if that run packed nothing). A finished run that differs is
refused, exit 2, naming what differs. A Ctrl-C that lands once the manifest is written exits 130 with
``INTERRUPTED_AFTER_FINISH``: the interrupt is honoured (``cook run ... && next`` stops), and the line
says the output is complete, so there is nothing to resume; a rerun reports the finished run, exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import asdict, dataclass
from typing import Any

from cook.cli.paths import show
from cook.cli.preflight import preflight
from cook.config import PipelineConfig, load_config
from cook.dataset_stats import packing_efficiency, packing_figure_rows, stored_fill
from cook.errors import interrupts_held
from cook.manifest import LineageEntry
from cook.runner.driver import Executor
from cook.runner.pipeline import ExecutorFactory, InterruptedAfterFinish, RunSummary, run_pipeline
from cook.runner.plan import plan_units
from cook.runner.progress import Progress
from cook.runner.units import Unit
from cook.tokenize.tokenizer_files import needs_transformers

TRUNCATION_WARN_SHARE = 0.01  # warn when more than this share of the packed records was truncated
TOP_REASONS = 3
INTERRUPTED_AFTER_FINISH = "interrupted after the run finished: the output is complete ({})"
AUTO_RAY_MIN_BYTES = 256 * 2**20  # --workers auto: Ray only for 2+ work units of at least this much input


@dataclass(frozen=True)
class ExecutorChoice:
    """What ``--workers auto`` picked: ``workers`` 0 cooks in-process, more starts Ray; ``reason`` is
    the stderr line (without ``cook: ``)."""

    workers: int
    reason: str


def choose_executor(units: int, input_bytes: int, num_actors: int) -> ExecutorChoice:
    """``--workers auto`` without a Ray address: Ray (``num_actors`` actors) for a job of 2+ work units
    and at least ``AUTO_RAY_MIN_BYTES`` of input, in-process for any other.

    >>> choose_executor(1, 10 * 2**30, 2).reason
    'in-process (1 work unit; Ray starts only for jobs of 2+ units and 256 MiB or more)'
    """
    threshold = f"{AUTO_RAY_MIN_BYTES / 2**20:g} MiB"
    count = f"{units} work unit{'s' * (units != 1)}"
    if units < 2:
        return ExecutorChoice(0, f"in-process ({count}; Ray starts only for jobs of 2+ units and {threshold} or more)")
    size = f"{count}, {input_bytes / 2**20:.1f} MiB of input"
    if input_bytes < AUTO_RAY_MIN_BYTES:
        return ExecutorChoice(0, f"in-process ({size}; Ray starts only for jobs of {threshold} or more)")
    return ExecutorChoice(num_actors, f"Ray ({size}; in-process below 2 units or {threshold})")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="cook a pipeline into an Energon dataset")
    p.add_argument("pipeline", help="pipeline YAML file")
    p.add_argument("--input", help="override input.path")
    p.add_argument("--output", help="override output.dir")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    add_run_flags(p)
    p.set_defaults(handler=handle)


def add_run_flags(p: Any) -> None:
    """The flags ``cook run`` and ``cook repack`` share: the executor and the output."""
    p.add_argument(
        "--ray-address", help="join this Ray cluster (HOST:PORT, auto, ray://HOST[:PORT]) instead of an embedded one"
    )
    p.add_argument(
        "--workers",
        type=workers_arg,
        default="auto",
        metavar="auto|N",
        help=f"auto (default): in-process for a job of 1 work unit or under {AUTO_RAY_MIN_BYTES / 2**20:g} MiB of "
        "input, else Ray with ray.num_actors actors; N: N Ray actors (overrides ray.num_actors); 0: in-process",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a finished run in the output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print the run summary as one JSON object instead of a table")


def workers_arg(text: str) -> int | str:
    """``--workers`` of ``cook run`` and ``cook repack``: ``auto`` or an integer >= 0."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def executor_factory(address: str | None, workers: int, quiet: bool = True) -> ExecutorFactory:
    def make(config: PipelineConfig) -> Executor:
        if workers == 0:
            from cook.runner.local import LocalExecutor

            return LocalExecutor(config)
        from cook.runner.ray_executor import RayExecutor

        actors = min(workers, config.ray.num_actors)  # run_pipeline caps it at the number of units
        if not quiet:
            Progress.status(ray_line(address, actors))
        return RayExecutor(config, address, actors)

    return make


def ray_line(address: str | None, actors: int) -> str:
    """The status line of a Ray run: cook starts Ray only without a cluster address.

    >>> ray_line(None, 2), ray_line("10.0.0.5:6379", 1)
    ('cook: starting Ray (2 actors)...', 'cook: joining Ray at 10.0.0.5:6379 (1 actor)...')
    """
    ray = "starting Ray" if address in (None, "local") else f"joining Ray at {address}"
    return f"cook: {ray} ({actors} actor{'s' * (actors > 1)})..."


def tail_padding(summary: RunSummary, seq_len: int) -> int:
    """Capacity no sequence uses: packs x seq_len = tokens + pad-multiple padding + tail padding."""
    c = summary.counts
    return c["packs"] * seq_len - c["tokens"] - c["padding_tokens"]


def summary_table(summary: RunSummary, seq_len: int) -> str:
    c = summary.counts
    rows = [
        ("output", summary.out_dir + (" (resumed an interrupted run)" if summary.resumed else "")),
        ("records in", f"{c['records_in']:,}"),
        ("sources packed", f"{c['sources_packed']:,}"),
        ("records rejected", f"{c['records_rejected']:,}"),
        *((f"  {reason}", f"{n:,}") for reason, n in summary.rejects_by_reason.items()),
        ("truncated sequences", f"{c.get('truncated_sequences', 0):,} (cut to packing.seq_len)"),
        ("truncated tokens", f"{c.get('truncated_tokens', 0):,}"),
        ("packs", f"{c['packs']:,} (seq_len {seq_len:,})"),
        ("shards", f"{summary.shards:,}"),
        ("tokens", f"{c['tokens']:,}"),
        ("target tokens", f"{c['target_tokens']:,}"),
        ("padding tokens", f"{c['padding_tokens']:,} (each sequence to packing.pad_multiple)"),
        ("tail padding", f"{tail_padding(summary, seq_len):,} (each pack to seq_len)"),
        ("packs x seq_len", f"{c['packs'] * seq_len:,} (tokens + padding + tail)"),
        *packing_figure_rows(
            packing_efficiency(c["tokens"], c["packs"], seq_len),
            stored_fill(c["tokens"], c["tokens"] + c["padding_tokens"]),
        ),
        ("wall time", f"{summary.seconds:.1f} s"),
        ("throughput", f"{c['tokens'] / max(summary.seconds, 1e-9):,.0f} tokens/s"),
    ]
    width = max(len(k) for k, _ in rows)
    rule = "-" * (width + 2 + max(len(v) for _, v in rows))
    return "\n".join([rule, *(f"{k:<{width}}  {v}" for k, v in rows), rule])


def truncation_warning(counts: dict[str, int], seq_len: int) -> str | None:
    """One stderr line when more than 1% of the packed records were truncated to fit ``seq_len``."""
    truncated, packed = counts.get("truncated_sequences", 0), counts.get("sources_packed", 0)
    if not packed or truncated <= TRUNCATION_WARN_SHARE * packed:
        return None
    return (
        f"cook: warning: {truncated:,} of {packed:,} packed records ({truncated / packed:.1%}) were truncated to "
        f"packing.seq_len={seq_len:,}, {counts.get('truncated_tokens', 0):,} tokens cut; raise packing.seq_len, "
        f"or set packing.overflow=reject to reject them instead"
    )


def nothing_packed(summary: RunSummary, config: PipelineConfig) -> str:
    """The one line of a run that packed nothing: how many were rejected and why."""
    rejected = summary.counts.get("records_rejected", 0)
    if not summary.counts.get("records_in", 0):
        return f"no record was packed: the input held no records (input.path {config.input.path!r})"
    top = sorted(summary.rejects_by_reason.items(), key=lambda item: (-item[1], item[0]))[:TOP_REASONS]
    reasons = ", ".join(f"{reason} {n}" for reason, n in top)
    return (
        f"no record was packed: {rejected} rejected (top reasons: {reasons}); "
        f"see {summary.out_dir}/rejects.jsonl and cook_manifest.json"
    )


def run_flags(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The keys the flags of ``cook run`` (or ``cook repack``, which has no ``--input``) set: key path ->
    (flag, value as given)."""
    flags: dict[str, tuple[str, Any]] = {}
    if getattr(args, "input", None):
        flags["input.path"] = ("--input", args.input)
    if args.output:
        flags["output.dir"] = ("--output", args.output)
    if isinstance(args.workers, int) and args.workers > 0:  # workers_arg refused a negative one
        flags["ray.num_actors"] = ("--workers", args.workers)
    if args.ray_address:
        flags["ray.address"] = ("--ray-address", args.ray_address)
    return flags


@contextmanager
def joined_cluster(config: PipelineConfig, workers: int) -> Iterator[None]:
    """Join ``ray.address`` before any work (bounded; ConfigError when it cannot be), leave it after."""
    if workers == 0 or config.ray.address in (None, "local"):  # in-process, or the executor's embedded Ray
        yield
        return
    from cook.runner.ray_connect import start_ray

    with redirect_stdout(sys.stderr):  # while joined, Ray's driver prints an actor's death on stdout (--json's)
        joined = start_ray(config.ray.address, 0, config.ray.connect_timeout_s)
        try:
            yield
        finally:
            if joined:
                import ray

                ray.shutdown()


def _import_libraries(tokenizer_path: str) -> None:
    """Import the native tokenizer libraries with SIGINT held: an interrupt inside a native start-up
    (torch's, when a tokenizer directory needs transformers) aborts the interpreter (SIGABRT); held,
    it arrives right after, as KeyboardInterrupt. transformers (and torch) are imported only for a
    tokenizer directory that needs AutoTokenizer (``cook.tokenize.tokenizer_files``)."""
    with interrupts_held():
        import tokenizers  # noqa: F401

        if needs_transformers(tokenizer_path):
            from transformers import AutoTokenizer  # noqa: F401


def already_finished(summary: RunSummary) -> str:
    """The one line of a rerun of a finished run."""
    c = summary.counts
    return (
        f"cook: already finished: {summary.out_dir} holds this very run ({c['packs']:,} packs in "
        f"{summary.shards:,} shards, {c['records_rejected']:,} records rejected); nothing to do"
    )


def handle(args: argparse.Namespace) -> int:
    config = load_config(args.pipeline, args.overrides, run_flags(args))
    _import_libraries(config.tokenizer.path)
    preflight(config)
    units = plan_units(config.input)  # once: the executor choice and the run share it
    return run_and_report(config, args, units, lambda summary: nothing_packed(summary, config))


def run_and_report(
    config: PipelineConfig,
    args: argparse.Namespace,
    units: list[Unit],
    empty: Callable[[RunSummary], str],
    lineage: tuple[LineageEntry, ...] = (),
) -> int:
    """Run ``units`` (``cook run`` and ``cook repack``: ``args`` has their shared flags) on the executor
    ``--workers`` picks, print the summary and pick the exit code; ``empty`` words a run that packed nothing."""
    workers = pick_workers(args.workers, config, args.quiet, units)
    summary: RunSummary | None = None
    try:
        with joined_cluster(config, workers):
            summary = run_pipeline(
                config,
                executor_factory(config.ray.address, workers, args.quiet),
                overwrite=args.overwrite,
                progress=not args.quiet,
                units=units,
                lineage=lineage,
            )
        return _report(summary, config, args.json, empty)
    except KeyboardInterrupt as interrupt:
        if summary is None and not isinstance(interrupt, InterruptedAfterFinish):
            raise  # work is left: cook.cli.main says to rerun the same command
        print(INTERRUPTED_AFTER_FINISH.format(config.output.dir), file=sys.stderr)
        return 130


def pick_workers(requested: int | str, config: PipelineConfig, quiet: bool, units: list[Unit] | None = None) -> int:
    """The actors to start (0: in-process): ``--workers N`` as given, ``auto`` from the unit plan
    (``units``, planned here when not given; ``choose_executor``, said on one stderr line) unless a
    Ray address is given."""
    if requested == 0:
        return 0
    if requested != "auto" or config.ray.address is not None:
        return config.ray.num_actors
    if units is None:
        units = plan_units(config.input)
    choice = choose_executor(len(units), sum(unit.size_bytes for unit in units), config.ray.num_actors)
    if not quiet:
        print(f"cook: {choice.reason}", file=sys.stderr, flush=True)
    return choice.workers


def _report(summary: RunSummary, config: PipelineConfig, as_json: bool, empty: Callable[[RunSummary], str]) -> int:
    """Print the summary (or the already-finished line) and pick the exit code."""
    if as_json:
        show(json.dumps(asdict(summary), sort_keys=True))
    elif summary.already_finished:
        show(already_finished(summary))
    else:
        show(summary_table(summary, config.packing.seq_len))
    warning = truncation_warning(summary.counts, config.packing.seq_len)
    if warning and not summary.already_finished:  # said when the run was made
        print(warning, file=sys.stderr)
    if summary.counts["packs"] == 0:
        print(f"cook: error: {empty(summary)}", file=sys.stderr)
        return 1
    return 0
