"""Media drawn at its placeholder: ``MediaCursor`` walks the pack's visual items and audio clips in
placeholder order while the text is drawn, and returns each item's HTML at its first ``<image>`` run
(a video: at its first frame group) or its ``<so_embedding>`` run.

Every visual item and every audio clip is exactly one ``<img class="media">`` (a video is one strip of
its frames; tiles are one picture of the tile grid, plus an ``<img class="thumb">`` for the thumbnail).
A picture is shown downscaled; its "full size" link (``#m<row>``, CSS ``:target``, no script) shows it at
its stored size. The patch-grid overlay is toggled by the page's "patch grid" checkbox.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.types import Pack
from cook.validate.media import clip_tokens, visual_embeddings
from cook.view import media_images as mi
from cook.view.page import text

MEL_MIN_WIDTH_PX = 360  # a short clip's log-mel is stretched to at least this width for reading


def _pct(parts: int) -> str:
    return f"{100.0 / parts:.4f}%"


def _grid(item: mi.VisualItem, cols: int = 1, rows: int = 1) -> str:
    grid_w, grid_h = cols * item.width_px // fmt.PATCH_SIZE, rows * item.height_px // fmt.PATCH_SIZE
    return f'<span class="grid" style="background-size:{_pct(grid_w)} {_pct(grid_h)}"></span>'


def _links(anchor: str) -> str:
    return f' · <a href="#{anchor}">full size</a> · <a href="#top">fit</a>'


def image_html(pack: Pack, item: mi.VisualItem) -> str:
    pixels = mi.item_frames(pack, item)[0]  # uint8 [H, W, 3]
    anchor = f"m{item.index}"
    embeddings = visual_embeddings(item.kind, item.frames, item.height_px, item.width_px)
    return (
        f'<span class="item image" id="{anchor}"><span class="pic">'
        f'<img class="media" data-item="{item.index}" src="{mi.data_uri(mi.png_bytes(pixels))}" '
        f'width="{item.width_px}" height="{item.height_px}" alt="image {item.index}">{_grid(item)}</span>'
        f'<span class="caption">image {item.index}: {item.width_px}x{item.height_px} px, '
        f"{item.width_px // fmt.PATCH_SIZE}x{item.height_px // fmt.PATCH_SIZE} patches, {embeddings} embeddings"
        f"{_links(anchor)}</span></span>"
    )


def tiles_html(pack: Pack, item: mi.VisualItem) -> str:
    tiles = mi.item_frames(pack, item)  # uint8 [tiles, 512, 512, 3], thumbnail last
    cols, rows = mi.tile_layout(tiles)
    whole = mi.assemble_tiles(tiles, cols, rows)
    anchor = f"m{item.index}"
    thumb = ""
    if tiles.shape[0] > 1:
        thumb = f'<img class="thumb" src="{mi.data_uri(mi.png_bytes(tiles[-1]))}" alt="thumbnail of {item.index}">'
    tile_lines = f'<span class="tilegrid" style="background-size:{_pct(cols)} {_pct(rows)}"></span>'
    return (
        f'<span class="item tiles" id="{anchor}"><span class="pic">'
        f'<img class="media" data-item="{item.index}" src="{mi.data_uri(mi.png_bytes(whole))}" '
        f'width="{whole.shape[1]}" height="{whole.shape[0]}" alt="tiles {item.index}">'
        f"{_grid(item, cols, rows)}{tile_lines}</span>{thumb}"
        f'<span class="caption">tiles {item.index}: {cols}x{rows} grid of {fmt.TILE_SIZE} px tiles'
        f"{' + thumbnail' if thumb else ''} ({item.frames} tiles, "
        f"{fmt.tiles_embeddings(item.frames)} embeddings){_links(anchor)}</span></span>"
    )


def video_html(pack: Pack, item: mi.VisualItem, labels: list[str | None]) -> str:
    frames = mi.item_frames(pack, item)  # uint8 [F, H, W, 3]
    groups = item.frames // fmt.TEMPORAL_PATCH
    embeddings = visual_embeddings("video", item.frames, item.height_px, item.width_px)
    anchor = f"m{item.index}"
    names = [
        text(label) if label else f"frames {2 * g + 1}-{2 * g + 2}"
        for g, label in enumerate([*labels[:groups], *[None] * max(0, groups - len(labels))])
    ]
    return (
        f'<span class="item video" id="{anchor}"><span class="strip">'
        f'<img class="media" data-item="{item.index}" src="{mi.data_uri(mi.png_bytes(mi.video_strip(frames)))}" '
        f'alt="video {item.index}">'
        f'<span class="labels" style="grid-template-columns:repeat({groups},1fr)">'
        + "".join(f'<span class="label">{name}</span>' for name in names)
        + f'</span></span><span class="caption">video {item.index}: {item.frames} frames of '
        f"{item.width_px}x{item.height_px} px, {groups} groups of {fmt.TEMPORAL_PATCH}, "
        f"{embeddings} embeddings{_links(anchor)}</span></span>"
    )


def clip_html(pack: Pack, clip: int, tokens: int) -> str:
    assert pack.audio_features is not None and pack.audio_lengths is not None
    valid = int(pack.audio_lengths[clip])
    stored = pack.audio_features.shape[1]
    picture = mi.mel_picture(pack.audio_features[clip], valid)
    seconds = valid * fmt.AUDIO_HOP / fmt.AUDIO_SAMPLE_RATE_HZ
    return (
        f'<span class="item audio" id="a{clip}"><span class="mel">'
        f'<img class="media" data-clip="{clip}" src="{mi.data_uri(mi.png_bytes(picture))}" '
        f'style="width:{max(picture.width, MEL_MIN_WIDTH_PX)}px" alt="audio clip {clip}"></span>'
        f'<span class="caption">audio clip {clip}: log-mel, {fmt.MEL_BINS} bins x {valid} valid frames '
        f"({seconds:.2f} s) of {stored} stored; the red mark ends the valid frames; {tokens} tokens</span></span>"
    )


class MediaCursor:
    """The next visual item and audio clip of the pack, consumed in placeholder order."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.items = mi.visual_items(pack)
        self.item = 0
        self.used = 0  # <image> tokens of the current item seen so far
        lengths = pack.audio_lengths if pack.audio_lengths is not None else np.zeros(0, np.int32)  # int32 [C]
        self.clip_tokens: list[int] = clip_tokens(lengths).tolist()
        self.clip = 0

    def image_run(self, tokens: int, labels: list[str | None]) -> str:
        """HTML for a run of ``tokens`` ``<image>`` tokens: the item it starts, or "" inside one."""
        if self.item >= len(self.items):
            return ""
        item = self.items[self.item]
        out = ""
        if self.used == 0:
            if item.kind == "video":
                out = video_html(self.pack, item, labels)
            elif item.kind == "tiles":
                out = tiles_html(self.pack, item)
            else:
                out = image_html(self.pack, item)
        self.used += tokens
        if self.used >= visual_embeddings(item.kind, item.frames, item.height_px, item.width_px):
            self.item, self.used = self.item + 1, 0
        return out

    def audio_run(self, tokens: int) -> str:
        """HTML for a run of ``tokens`` ``<so_embedding>`` tokens: the clips whose tokens fill it."""
        out, taken = [], 0
        while taken < tokens and self.clip < len(self.clip_tokens):
            out.append(clip_html(self.pack, self.clip, self.clip_tokens[self.clip]))
            taken += self.clip_tokens[self.clip]
            self.clip += 1
        return "".join(out)
