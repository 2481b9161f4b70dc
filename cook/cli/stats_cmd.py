"""``cook stats DIR|BLEND.yaml [--plot FILE.png] [--json] [--global-batch-size N]``: packing efficiency and stored
fill (``cook.dataset_stats``), pack fill and sequence-length histograms, sources per pack, media-token
share, truncation and reject reasons.

``cook stats blend.yaml`` (written by ``cook blend``) shows each part's figures and then the blend's
(``cook blend``'s table: packs, target tokens, sample and target-token shares, steps per epoch);
``--json`` gives ``{"parts": [{name, weight, path, stats}], "blend": {...}}``. A part that is not a
cooked dataset, or parts whose contracts differ, exit 2; ``--plot``/``--html`` take one dataset.

A text table on stdout, or one JSON object with ``--json`` (``StatsSummary.to_dict``, from
``cook.validate.stats.summarize``). ``--plot`` writes a 2x2 PNG (matplotlib, Agg): fill histogram,
sequence lengths, sources per pack, reject reasons. Truncation (``truncated_sequences``,
``truncated_tokens``) comes from the manifest's counts (0 for a manifest written before they were
counted). ``--global-batch-size N`` adds ``steps_per_epoch`` = packs // N (full global batches of N
packs in one pass) and ``target_tokens_per_step`` (the manifest's target tokens per pack times N, a
mean). Exit 0; 2 for a directory that is not a dataset or a ``--plot`` path that cannot be written
(checked before the dataset is read); 1 for a manifest, a shard, a pack or a ``rejects.jsonl`` line that
cannot be read (one line naming it; ``cook validate`` says more).

``--html FILE`` writes one self-contained page (``cook.view.stats_page``): the same plots, a table per
input file and the reject reasons with examples; a path that cannot be written exits 2 before any work.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import itertools
import json
import os
import sys
from typing import IO, Any

from cook.blend import blend_report, read_blend
from cook.cli.blend_cmd import check_run_length, load_datasets
from cook.cli.blend_cmd import table as blend_table
from cook.cli.inspect_cmd import one_line
from cook.cli.paths import check_output_file, show
from cook.dataset_stats import Distribution, Histogram, StatsSummary, packing_figure_rows
from cook.errors import ConfigError
from cook.manifest import ManifestError
from cook.packfiles import PackUnreadable
from cook.validate import check_is_dataset
from cook.validate.stats import RejectsUnreadable, compute_stats, summarize
from cook.view.stats_page import render_stats_page
from cook.writer.atomic import atomic_write


def add_parser(sub: Any) -> None:
    p = sub.add_parser("stats", help="packing efficiency, stored fill, histograms, media share, rejects")
    p.add_argument("dir", help="cooked dataset directory, or a blend YAML (cook blend): each part, then the blend")
    p.add_argument("--plot", metavar="FILE.png", help="write a 2x2 PNG of the histograms")
    p.add_argument("--html", metavar="FILE", help="write one self-contained HTML page: plots, per-file table, rejects")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--global-batch-size", type=int, metavar="N", help="also report steps per epoch at N packs a step")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    check_run_length(args.global_batch_size, None)
    if os.path.isfile(args.dir):
        return handle_blend(args)
    check_is_dataset(args.dir)  # NotADataset is a ConfigError: exit 2, one line
    if args.plot:
        check_plot_path(args.plot)
    if args.html:
        check_output_file("--html", args.html, "stats.html")
    summary = read_summary(args.dir, args.global_batch_size)
    if summary is None:
        return 1
    if args.plot:
        try:
            plot(summary, args.plot, args.dir)
        except OSError as err:
            raise ConfigError(f"--plot {args.plot}: cannot write ({err.strerror or err})") from None
        print(f"cook stats: wrote {args.plot}", file=sys.stderr)
    if args.html:
        write_html(summary, args.html, args.dir)
    show(json.dumps(summary.to_dict()) if args.json else table(summary))
    return 0


def read_summary(root: str, global_batch_size: int | None) -> StatsSummary | None:
    """The dataset's ``StatsSummary``; None after printing the one line that says what cannot be read."""
    try:
        return summarize(compute_stats(root), global_batch_size)
    except ManifestError as err:
        print(f"cook: error: {err}; run cook validate", file=sys.stderr)
    except (PackUnreadable, RejectsUnreadable) as err:
        print(f"cook: error: {root}: {one_line(str(err))}; run cook validate", file=sys.stderr)
    return None


def handle_blend(args: argparse.Namespace) -> int:
    """``cook stats blend.yaml``: each part's figures, then the blend's shares (``cook.blend``)."""
    if args.plot or args.html:
        raise ConfigError(f"--plot/--html: give one cooked dataset, not the blend {args.dir}")
    specs = read_blend(args.dir)
    parts = load_datasets(specs)
    summaries = []
    for spec in specs:
        summary = read_summary(spec.path, args.global_batch_size)
        if summary is None:
            return 1
        summaries.append(summary)
    report = blend_report(parts, args.global_batch_size)
    if args.json:
        entries = [{**vars(spec), "stats": s.to_dict()} for spec, s in zip(specs, summaries, strict=True)]
        show(json.dumps({"parts": entries, "blend": report.to_dict()}))
        return 0
    sections = [
        f"== part {spec.name} (weight {spec.weight:g}): {spec.path}\n{table(s)}"
        for spec, s in zip(specs, summaries, strict=True)
    ]
    show("\n\n".join([*sections, f"== blend {args.dir}\n{blend_table(report)}"]))
    return 0


def write_html(summary: StatsSummary, path: str, root: str) -> None:
    """``--html FILE``: the plot drawn in memory, embedded in the stats page."""
    buffer = io.BytesIO()
    plot(summary, buffer, root)
    atomic_write(path, render_stats_page(root, summary, buffer.getvalue()))
    print(f"cook stats: wrote {path}", file=sys.stderr)


def check_plot_path(path: str) -> None:
    """``--plot FILE.png`` can be written: matplotlib is installed (the ``cook[plot]`` extra), the
    directory exists and is writable, and the path is not a directory."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(f"--plot {path}: needs matplotlib, which is not installed (pip install 'cook[plot]')")
    check_output_file("--plot", path, "stats.png")


def _bar(count: int, most: int, width: int = 30) -> str:
    return "█" * round(width * count / most) if most else ""


def _histogram_rows(histogram: Histogram, label: str, whole: bool = False) -> list[str]:
    """One row per bin; ``whole``: bins of whole numbers (edges at .5), labelled by their first and last."""
    edges, counts = histogram.edges, histogram.counts
    most = max(counts, default=0)
    rows = []
    for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True):
        name = label.format(lo=lo, hi=hi)
        if whole:
            first, last = round(lo + 0.5), round(hi - 0.5)
            name = str(first) if first == last else f"{first}-{last}"
        rows.append(f"  {name:>16}  {n:>8,}  {_bar(n, most)}")
    return rows


def _distribution(d: Distribution, fmt_value: str = "{:,.0f}") -> str:
    return "  ".join(f"{key} {fmt_value.format(getattr(d, key))}" for key in ("min", "median", "p90", "max"))


def table(s: StatsSummary) -> str:
    lines = [
        *(f"{name:<20}{value}" for name, value in s.rows()),
        "",
        f"pack fill (T / seq_len)      {_distribution(s.fill, '{:.2f}')}",
        *_histogram_rows(s.fill.histogram, "{lo:.1f}-{hi:.1f}"),
        "",
        f"sequence length (tokens)     {_distribution(s.sequence_length)}",
        *_histogram_rows(s.sequence_length.histogram, "{lo:,.0f}-{hi:,.0f}"),
        "",
        f"sources per pack             {_distribution(s.sources_per_pack)}",
        *_histogram_rows(s.sources_per_pack.histogram, "", whole=True),
        "",
        "rejects" + ("" if s.rejects else "             none"),
        *(f"  {reason:<16}  {n:>8,}" for reason, n in s.rejects.items()),
    ]
    return "\n".join(lines)


def plot(s: StatsSummary, path: str | IO[bytes], title: str) -> None:
    """The 2x2 PNG: fill, sequence lengths, sources per pack, reject reasons."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    media = s.media_tokens
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), constrained_layout=True)
    fig.suptitle(
        f"cook stats: {title}\n{s.packs:,} packs, {s.sources:,} sources, media tokens: image "
        f"{media.image_share:.1%}, video {media.video_share:.1%}, audio {media.audio_share:.1%}\n"
        + ", ".join(f"{name} {figure}" for name, figure in packing_figure_rows(s.packing_efficiency, s.stored_fill)),
        fontsize=13,
    )
    panels = [  # (axes, figures, title, x label, y label, median label format and legend place, or None)
        (axes[0, 0], s.fill, "Pack fill (T / seq_len)", "fill", "packs", (".2f", "upper left")),
        (axes[0, 1], s.sequence_length, "Sequence length", "tokens", "sequences", (",.0f", "upper right")),
        (axes[1, 0], s.sources_per_pack, "Sources per pack", "sources in the pack", "packs", None),
    ]
    for ax, figures, name, xlabel, ylabel, median in panels:
        edges, counts = figures.histogram.edges, figures.histogram.counts
        ax.bar(
            edges[:-1],
            counts,
            width=[hi - lo for lo, hi in itertools.pairwise(edges)],
            align="edge",
            color="#4c72b0",
            edgecolor="white",
        )
        ax.set(title=name, xlabel=xlabel, ylabel=ylabel)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", alpha=0.3)
        if median is not None:
            ax.axvline(figures.median, color="#c44e52", linestyle="--", label=f"median {figures.median:{median[0]}}")
            ax.legend(loc=median[1])
    axes[1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
    ax = axes[1, 1]
    reasons = list(s.rejects.items())
    if reasons:
        ax.barh([r for r, _ in reasons][::-1], [n for _, n in reasons][::-1], color="#dd8452")
    else:
        ax.text(0.5, 0.5, "no rejects", ha="center", va="center", transform=ax.transAxes, fontsize=12)
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set(title="Reject reasons", xlabel="records", ylabel="reason")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=100)
    plt.close(fig)
