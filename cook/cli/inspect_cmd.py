"""``cook inspect DIR [--pack N | --source ID] [--tokenizer PATH] [--html FILE]``: show one pack.

Prints the pack's sources (one row per sequence), a media summary (patches, media_sizes rows, audio
clips) and each sequence's text decoded with the dataset's tokenizer, target tokens marked: bold
green on a terminal, ``[[...]]`` otherwise. Runs of placeholders are shown collapsed
(``<image>×256``), and control characters from the data are escaped so text cannot drive the terminal.

``--source`` takes a source id exactly as written (``<file>#<line or key>``) or a suffix of one; a
suffix that several sources end with lists them instead of picking one, and a source that was
rejected says so, with its reason from ``rejects.jsonl``.

``--html FILE`` writes the pack as one self-contained HTML page instead (``cook.view.pack_page``): media
reassembled from the stored patches at its placeholders, targets highlighted; nothing is printed on stdout.
``--html-max-mb MB`` (default 3; 0 = none) is the page budget: pictures whose lossless PNG would pass it
are shown as small JPEG previews, marked as such.

Exit 0; 2 for a directory that is not a dataset, a pack index out of range, an ambiguous suffix or a
source no pack holds (a rejected one included); 1 for a manifest that cannot be read, a shard that cannot
be walked to the pack (missing, truncated, corrupt), or a pack that breaks any per-pack invariant
``cook validate`` checks (``validate.scan.check_pack``: ids outside the vocabulary, boundaries, masks,
media rows), so that nothing damaged reaches the tokenizer or the page (one line naming the pack and its
problems; ``cook validate`` says more).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from cook import format as fmt
from cook.cli.paths import check_output_file, show
from cook.errors import ConfigError
from cook.manifest import ManifestError, load_manifest
from cook.packfiles import (
    ONLY_META,
    VISUAL_KINDS,
    PackUnreadable,
    clip_tokens,
    find_pack,
    iter_packs,
    visual_embeddings,
)
from cook.types import Pack
from cook.validate import check_is_dataset
from cook.validate.manifest import pack_rules
from cook.validate.members import parse_pack
from cook.validate.scan import check_pack
from cook.validate.tokenizer_info import load_tokenizer
from cook.view import tokens as view_tokens
from cook.view.media_images import stored_frames
from cook.view.pack_page import DEFAULT_MAX_BYTES, render_pack_page
from cook.view.page import CONTROL_CHARS
from cook.view.pieces import COLLAPSIBLE
from cook.view.stats_page import read_rejects
from cook.writer.atomic import atomic_write

SHOWN_MATCHES = 5


def add_parser(sub: Any) -> None:
    p = sub.add_parser("inspect", help="show one pack: sources, text with targets marked, media")
    p.add_argument("dir", help="cooked dataset directory")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pack", type=int, default=0, help="pack index (default 0)")
    which.add_argument("--source", help="show the pack holding this source (exact, or a unique-enough suffix)")
    p.add_argument("--tokenizer", help="tokenizer directory (default: the manifest's tokenizer.path)")
    p.add_argument("--html", metavar="FILE", help="write the pack as one self-contained HTML page (media drawn)")
    p.add_argument(
        "--html-max-mb",
        type=float,
        default=DEFAULT_MAX_BYTES / 1e6,
        metavar="MB",
        help="page budget: pictures past it are shown as previews (default 3; 0 = every picture at full size)",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    check_is_dataset(args.dir)  # NotADataset is a ConfigError: exit 2, one line
    try:
        manifest = load_manifest(args.dir)
    except ManifestError as err:
        print(f"cook: error: {err}; run cook validate", file=sys.stderr)
        return 1
    if args.html:
        check_output_file("--html", args.html, "pack.html")
    if not args.html_max_mb >= 0:
        raise ConfigError(f"--html-max-mb: must be >= 0 (0 = no budget), got {args.html_max_mb}")
    try:
        index = args.pack if args.source is None else locate_source(args.dir, args.source)
        found = find_pack(args.dir, index) if index >= 0 else None
    except PackUnreadable as err:
        print(f"cook: error: {args.dir}: {one_line(str(err))}; run cook validate", file=sys.stderr)
        return 1
    if found is None:
        total = sum(shard.packs for shard in manifest.shards)
        held = f"packs 0..{total - 1}" if total else "no packs"
        raise ConfigError(f"pack {index} is out of range: {args.dir} holds {held}")
    shard, raw = found
    pack, findings = parse_pack(raw)
    if pack is not None:
        findings += check_pack(pack, pack_rules(manifest.to_dict(), None, deep=False))
    if pack is None or findings:
        problems = one_line("; ".join(f"{code.value}: {detail}" for code, detail in findings))
        print(f"cook: error: {raw.key} in {shard} cannot be shown ({problems}); run cook validate", file=sys.stderr)
        return 1
    tokenizer, warnings = load_tokenizer(args.dir, args.tokenizer)
    for warning in warnings:
        print(f"cook inspect: warning: {warning}; showing token ids", file=sys.stderr)
    if tokenizer is not None:
        view = view_tokens.from_tokenizer(tokenizer)
    else:  # token ids, control tokens from the manifest
        view = view_tokens.from_ids(manifest.tokenizer.control_ids, manifest.tokenizer.pad_id)
    if args.html:  # stored frames as they are
        budget = round(args.html_max_mb * 1e6) or None
        stored = stored_frames(raw.members)
        atomic_write(
            args.html, render_pack_page(pack, raw.key, shard, manifest.seq_len, view, budget, args.source, stored)
        )
        print(f"cook inspect: wrote {args.html}", file=sys.stderr)
        return 0
    show(render(pack, raw.key, shard, args.source, view, sys.stdout.isatty()))
    return 0


def _pack_sources(root: str) -> Iterator[tuple[int, list[str]]]:
    """(pack index, its sources) for every pack, reading meta.json only."""
    for _, raw in iter_packs(root, skip=ONLY_META):
        digits = raw.key.removeprefix(fmt.PACK_KEY_PREFIX)
        try:
            body = json.loads(bytes(raw.members.get(fmt.META, b"{}")))
        except ValueError:
            continue  # an unreadable meta.json holds no findable source; cook validate reports it
        sequences = body.get("sequences") if isinstance(body, dict) else None
        if digits.isdigit() and isinstance(sequences, list):
            yield int(digits), [str(s.get("source", "")) for s in sequences if isinstance(s, dict)]


def _listed(names: list[str]) -> str:
    shown = ", ".join(one_line(name) for name in sorted(names)[:SHOWN_MATCHES])
    return shown + (f", ... ({len(names) - SHOWN_MATCHES} more)" if len(names) > SHOWN_MATCHES else "")


def locate_source(root: str, source: str) -> int:
    """The index of the pack holding ``source`` (exact, else the one source ending with it); else a
    ``ConfigError``, one line saying why not: ambiguous, rejected with its reason, or held nowhere."""
    suffix: dict[str, int] = {}
    for index, names in _pack_sources(root):
        if source in names:
            return index
        for name in names:
            if name.endswith(source):
                suffix.setdefault(name, index)
    rejected: dict[str, dict[str, Any]] = {}  # rejected sources equal to ``source`` or ending with it
    for row in read_rejects(root):
        if (name := str(row.get("source", ""))).endswith(source):
            rejected.setdefault(name, row)
    if source in rejected:
        raise ConfigError(_rejection(source, rejected[source]))
    if len(suffix) == 1 and not rejected:
        return next(iter(suffix.values()))
    if len(suffix) + len(rejected) > 1:
        raise ConfigError(
            f"--source {source!r} is ambiguous: {len(suffix) + len(rejected)} sources end with it "
            f"({_listed([*suffix, *rejected])}); give more of it"
        )
    if rejected:
        raise ConfigError(_rejection(*next(iter(rejected.items()))))
    raise ConfigError(f"no pack in {root} holds source {source!r}, and rejects.jsonl does not name it")


def one_line(text: str) -> str:
    """Data text made safe for one stderr line: control characters (newlines too) escaped."""
    return text.translate(CONTROL_CHARS).replace("\n", "\\n").replace("\t", "\\t")


def _rejection(name: str, row: dict[str, Any]) -> str:
    detail = one_line(str(row.get("detail", "")))[:200]
    reason = one_line(str(row.get("reason", "?")))
    return f"source {one_line(name)!r} was rejected ({reason}: {detail}), so no pack holds it; see rejects.jsonl"


def render(pack: Pack, key: str, shard: str, source: str | None, view: view_tokens.TokenView, color: bool) -> str:
    padded = pack.padded_tokens
    lines = [
        f"pack {int(key.removeprefix(fmt.PACK_KEY_PREFIX))} ({key}) in {shard}",
        f"  {padded:,} tokens: {pack.tokens:,} in {len(pack.sequences)} sequences + {padded - pack.tokens:,} "
        f"padding; {int(np.count_nonzero(pack.loss_mask)):,} targets",
        "",
        *source_table(pack, source),
        "",
        *media_summary(pack),
        "",
        "text (targets " + ("in bold green" if color else "in [[brackets]]") + ")",
    ]
    collapse = {i: name for i, name in view.controls.items() if name in COLLAPSIBLE}
    starts = pack.cu_seqlens_padded.astype(np.int64)
    for i, seq in enumerate(pack.sequences):
        lines.append(f"── sequence {i}: {seq.source} " + "─" * 8)
        span = slice(int(starts[i]), int(starts[i]) + seq.length)
        lines.append(marked_text(pack.input_ids[span], pack.loss_mask[span], view, collapse, color))
        pad = int(starts[i + 1] - starts[i]) - seq.length
        if pad:
            lines.append(f"(+ {pad} padding)")
    return "\n".join(lines)


def source_table(pack: Pack, source: str | None) -> list[str]:
    width = max(len("source"), *(len(s.source) for s in pack.sequences))
    rows = [f"      #  {'source':<{width}}  {'tokens':>7}  {'padded':>7}  {'targets':>7}  media"]
    padded = np.diff(pack.cu_seqlens_padded.astype(np.int64)).tolist()
    for i, seq in enumerate(pack.sequences):
        mark = ">" if source is not None and seq.source.endswith(source) else " "
        media = ", ".join(seq.media) or "-"
        cut = " (truncated)" if seq.truncated else ""
        rows.append(
            f"  {mark} {i:>3}  {seq.source:<{width}}  {seq.length:>7}  {padded[i]:>7}  {seq.targets:>7}  {media}{cut}"
        )
    return ["sources", *rows]


def media_summary(pack: Pack) -> list[str]:
    if pack.media_sizes is None and pack.audio_lengths is None:
        return ["media: none"]
    lines = ["media"]
    if pack.media_sizes is not None and pack.pixel_patches is not None:
        kinds = [k for s in pack.sequences for k in s.media if k in VISUAL_KINDS]
        lines.append(f"  pixel_patches  uint8 {list(pack.pixel_patches.shape)}")
        lines.append(f"  media_sizes    {pack.media_sizes.shape[0]} rows (frames x height x width)")
        for row, (kind, (frames, height, width)) in enumerate(zip(kinds, pack.media_sizes.tolist(), strict=False)):
            patches = frames * fmt.frame_patches(height, width)
            lines.append(
                f"    {row:>3}  {kind:<6} {frames} x {height} x {width}  -> {patches:,} patches, "
                f"{visual_embeddings(kind, frames, height, width):,} embeddings"
            )
    if pack.audio_lengths is not None and pack.audio_features is not None:
        lines.append(
            f"  audio          {pack.audio_lengths.shape[0]} clips, features float16 {list(pack.audio_features.shape)}"
        )
        tokens = clip_tokens(pack.audio_lengths).tolist()
        for clip, (frames, n) in enumerate(zip(pack.audio_lengths.tolist(), tokens, strict=True)):
            seconds = frames * fmt.AUDIO_HOP / fmt.AUDIO_SAMPLE_RATE_HZ
            lines.append(f"    {clip:>3}  {frames} frames ({seconds:.2f} s) -> {n} tokens")
    return lines


def marked_text(
    ids: np.ndarray, mask: np.ndarray, view: view_tokens.TokenView, collapse: dict[int, str], color: bool
) -> str:
    """Decode ``ids`` run by run: a run is constant in target-ness and in which placeholder it repeats."""
    if not ids.size:
        return ""
    placeholder = np.where(np.isin(ids, list(collapse)), ids, -1) if collapse else np.full(ids.shape, -1)
    cuts = np.flatnonzero((np.diff(mask.astype(np.int64)) != 0) | (np.diff(placeholder) != 0)) + 1
    bounds = [0, *cuts.tolist(), int(ids.size)]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        token = collapse.get(int(placeholder[lo]))
        if token:
            text = (token if hi - lo == 1 else f"{token}×{hi - lo}") + view.separator
        else:
            text = view.decode(ids[lo:hi].tolist())
        text = text.translate(CONTROL_CHARS)
        if mask[lo]:  # a separator that ends the run stays outside the marks: ``[[209 13]] 198``
            core = text.removesuffix(view.separator) if view.separator else text
            text = (f"\x1b[1;32m{core}\x1b[0m" if color else f"[[{core}]]") + text[len(core) :]
        out.append(text)
    return "".join(out)
