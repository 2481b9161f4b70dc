"""One pack -> one self-contained HTML page (``cook inspect DIR --pack N --html FILE``).

    header     pack index, key, shard; fill bar: tokens | pad-multiple padding | tail padding of seq_len;
               sequences, targets, media share; the sequences as a table linking to their sections
    sequence   source, length, targets, truncated or not; the decoded text: control tokens as chips,
               role headers as separated lines, target tokens in <span class="target">, one span per
               run of loss_mask == 1 (``data-tokens`` = its length), runs of padding as one chip with a
               count; each medium drawn at its placeholder (media_html.MediaCursor)

Data text goes through ``page.text`` only; the page has no script (page.py).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from cook import format as fmt
from cook.packfiles import clip_tokens, visual_embeddings
from cook.types import Pack
from cook.view import media_images as mi
from cook.view.media_html import MediaCursor, StoredFrames
from cook.view.page import page, text
from cook.view.pieces import Piece, frame_labels, split_pieces
from cook.view.tokens import TokenView

DEFAULT_MAX_BYTES: Final = 3_000_000
OPEN_TABLE_ROWS: Final = 8  # the sequence table starts folded above this many sequences


def render_pack_page(
    pack: Pack,
    key: str,
    shard: str,
    seq_len: int | None,
    view: TokenView,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    source: str | None = None,
    stored: StoredFrames = (),
) -> str:
    """The whole page for one parsed pack (``cook.validate.members.parse_pack``); ``max_bytes`` is the page
    budget (``None``: every picture a lossless PNG, whatever the size; see media_html); the sequences
    whose source ends with ``source`` (``cook inspect --source``) are marked. ``stored``: the pack's stored
    frames (png/jpeg storage), embedded as they are."""
    cursor = MediaCursor(pack, max_bytes, stored)
    starts = pack.cu_seqlens_padded.astype(np.int64)
    sections = []
    for i, seq in enumerate(pack.sequences):
        lo = int(starts[i])
        pieces = split_pieces(pack.input_ids[lo : lo + seq.length], pack.loss_mask[lo : lo + seq.length], view)
        padding = int(starts[i + 1]) - lo - seq.length
        picked = source is not None and seq.source.endswith(source)
        sections.append(_sequence_html(i, pack, pieces, padding, cursor, picked))
    header = _header_html(pack, key, shard, seq_len, cursor.pictures.previews, source)  # after the media
    body = header + "\n<main>\n" + "\n".join(sections) + "\n</main>"
    return page(f"cook inspect: {key}", '<input type="checkbox" id="show-grid" hidden>\n' + body)


def _header_html(pack: Pack, key: str, shard: str, seq_len: int | None, previews: int, source: str | None) -> str:
    tokens, padded = pack.tokens, pack.padded_tokens
    capacity = max(seq_len or padded, padded)
    parts = [
        ("tok", tokens, "tokens"),
        ("padm", padded - tokens, "pad-multiple padding"),
        ("tail", capacity - padded, "tail padding"),
    ]
    bar = "".join(
        f'<span class="{css}" style="width:{100 * n / capacity:.3f}%" title="{name}: {n:,}"></span>'
        for css, n, name in parts
    )
    legend = "".join(f'<span class="sw {css}"></span>{name} {n:,}' for css, n, name in parts)
    # the media share: image and audio tokens implied by media_sizes and audio_lengths
    image = sum(visual_embeddings(i.kind, i.frames, i.height_px, i.width_px) for i in mi.visual_items(pack))
    audio = int(clip_tokens(pack.audio_lengths).sum()) if pack.audio_lengths is not None else 0

    def share(n: int) -> str:
        return f"{n / tokens:.1%}" if tokens else "0%"

    targets = int(np.count_nonzero(pack.loss_mask))
    index = key.removeprefix(fmt.PACK_KEY_PREFIX)
    return (
        f'<header class="top" id="top"><h1>pack {text(int(index) if index.isdigit() else index)} '
        f"<small>{text(key)} in {text(shard)}</small></h1>"
        f'<div class="fill">{bar}</div><p class="legend">{legend} '
        f"(of seq_len {capacity:,}; fill {padded / capacity:.1%})</p>"
        f"<p>{len(pack.sequences)} sequences · {tokens:,} tokens · {targets:,} targets · media share "
        f"image {image:,} ({share(image)}), audio {audio:,} ({share(audio)}) of the tokens · "
        f"{0 if pack.media_sizes is None else pack.media_sizes.shape[0]} visual items, "
        f"{0 if pack.audio_lengths is None else pack.audio_lengths.shape[0]} audio clips</p>"
        f'<p class="legend"><span class="sw tgt"></span>highlighted text is a target (loss_mask 1, trained on) · '
        f'<span class="chip">chips</span> are control tokens, <span class="chip pad">pad ×N</span> a run of padding · '
        '<label for="show-grid"><u>toggle the patch grid</u></label> over the images</p>'
        + (
            f'<p class="legend"><b>{previews} pictures are previews</b>: their lossless PNGs did not fit the page '
            "budget (--html-max-mb; 0 keeps every picture at full size)</p>"
            if previews
            else ""
        )
        + f"{_sequence_table(pack, source)}</header>"
    )


def _sequence_table(pack: Pack, source: str | None) -> str:
    padded = np.diff(pack.cu_seqlens_padded.astype(np.int64)).tolist()
    picked = [source is not None and s.source.endswith(source) for s in pack.sequences]
    rows = "".join(
        f'<tr{" class=picked" if picked[i] else ""}><td class="n"><a href="#seq-{i}">{i}</a></td>'
        f'<td>{text(s.source)}</td><td class="n">{s.length:,}</td>'
        f'<td class="n">{padded[i]:,}</td><td class="n">{s.targets:,}</td><td>{text(", ".join(s.media) or "-")}</td>'
        f"<td>{'yes' if s.truncated else 'no'}</td></tr>"
        for i, s in enumerate(pack.sequences)
    )
    head = (
        '<tr><th class="n">#</th><th>source</th><th class="n">length</th><th class="n">padded</th>'
        '<th class="n">targets</th><th>media</th><th>truncated</th></tr>'
    )
    table = f'<table class="sequences">{head}{rows}</table>'
    opened = " open" if len(pack.sequences) <= OPEN_TABLE_ROWS or any(picked) else ""
    return f"<details{opened}><summary>{len(pack.sequences)} sequences</summary>{table}</details>"


def _chip(piece: Piece) -> str:
    name = piece.control or ""
    if name == fmt.PAD_TOKEN:
        return f'<span class="chip pad">pad ×{piece.tokens}</span>'
    css = "chip media" if name in (fmt.IMAGE_TOKEN, fmt.AUDIO_TOKEN) else "chip"
    count = f"×{piece.tokens}" if piece.tokens > 1 else ""
    return f'<span class="{css}">{text(name)}{count}</span>'


def _role_header(piece: Piece, following: Piece | None) -> tuple[str, str | None]:
    """``<|im_start|>`` + the role word of the text after it -> (header HTML, the rest of that text)."""
    if following is None or following.control is not None:
        return f'<span class="role role-other">{_chip(piece)}</span>', None
    role, _, rest = following.text.partition("\n")
    css = role if role in fmt.ROLES else "other"
    return f'<span class="role role-{css}">{_chip(piece)} {text(role)}</span>', rest


def _sequence_html(i: int, pack: Pack, pieces: list[Piece], padding: int, cursor: MediaCursor, picked: bool) -> str:
    seq = pack.sequences[i]
    labels = frame_labels(pieces)
    image_runs = [j for j, p in enumerate(pieces) if p.control == fmt.IMAGE_TOKEN]
    run_number = {j: r for r, j in enumerate(image_runs)}
    run_tokens = _target_run_tokens(pieces)
    out: list[str] = []
    in_target = False
    skip_text: str | None = None
    for j, piece in enumerate(pieces):
        if piece.target and not in_target:
            out.append(f'<span class="target" data-tokens="{run_tokens[j]}">')
        elif not piece.target and in_target:
            out.append("</span>")
        in_target = piece.target
        if piece.control is None:
            out.append(text(piece.text if skip_text is None else skip_text))
            skip_text = None
        elif piece.control == fmt.IM_START:
            header, skip_text = _role_header(piece, pieces[j + 1] if j + 1 < len(pieces) else None)
            out.append(header)
        else:
            out.append(_chip(piece))
            if piece.control == fmt.IMAGE_TOKEN:
                ahead = [labels.get(k) for k in image_runs[run_number[j] :]]
                out.append(cursor.image_run(piece.tokens, ahead))
            elif piece.control == fmt.AUDIO_TOKEN:
                out.append(cursor.audio_run(piece.tokens))
    if in_target:
        out.append("</span>")
    if padding:
        out.append(f'<span class="chip pad">padding ×{padding}</span>')
    facts = (
        f"source {text(seq.source)} · length {seq.length:,} (+{padding} padding) · {seq.targets:,} targets · "
        f"{'truncated' if seq.truncated else 'not truncated'} · media: {text(', '.join(seq.media) or 'none')}"
    )
    return (
        f'<section class="sequence{" picked" if picked else ""}" id="seq-{i}"><h2>sequence {i} '
        f"<small>{text(seq.source)}{' (--source)' if picked else ''}</small></h2>"
        f'<p class="facts">{facts}</p><div class="text">{"".join(out)}</div></section>'
    )


def _target_run_tokens(pieces: list[Piece]) -> dict[int, int]:
    """Index of the first piece of each target run -> the run's tokens."""
    runs: dict[int, int] = {}
    first = None
    for j, piece in enumerate(pieces):
        if not piece.target:
            first = None
            continue
        first = j if first is None else first
        runs[first] = runs.get(first, 0) + piece.tokens
    return runs
