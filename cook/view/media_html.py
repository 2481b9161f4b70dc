"""Media drawn at its placeholder: ``MediaCursor`` walks the pack's visual items and audio clips in
placeholder order while the text is drawn, and returns each item's HTML at its first ``<image>`` run
(a video: at its first frame group) or its ``<so_embedding>`` run.

Every visual item and every audio clip is exactly one ``<img class="media">`` (a video is one strip of
its frames; tiles are one picture of the tile grid, plus an ``<img class="thumb">`` for the thumbnail).
A picture is shown downscaled; its "full size" link (``#m<row>``, CSS ``:target``, no script) shows it at
its stored size. The patch-grid overlay is toggled by the page's "patch grid" checkbox.

**Geometry.** An image or a tile grid is drawn in one box, ``<span class="pic">``, sized from the stored
pixels alone (``width: W px; aspect-ratio: W / H``, capped by the page's CSS): the picture fills that box
and every overlay is placed in percentages of it, so the outlines stay on the pixels at any page width,
before the picture decodes, and for a preview JPEG as for the exact PNG. Tile ``k`` (raster order, as
``cook/media/tiles.py`` cuts them: row ``k // cols``, column ``k % cols``) is ``<span class="tile"
data-tile="k">`` at left ``100 c / cols`` %, top ``100 r / rows`` %, ``100 / cols`` % x ``100 / rows`` %.
A 4x3 grid::

    tile 5 (row 1, column 1): left 25%, top 33.3333%, 25% x 33.3333%  -> pixels [512:1024, 512:1024]

The thumbnail (cook's 512x512 resize of the whole image) is drawn at the grid's aspect ``cols / rows``,
the shape of the image it was made from.

**Stored frames.** An image of a png/jpeg pack is embedded as its stored member, byte for byte (always
exact, spent from the budget as it is); tiles and video strips are drawn from the decoded frames.

**Page budget.** ``Pictures`` encodes each picture as a lossless PNG at its stored size (pixel-exact)
while the page stays under its byte budget (``cook inspect --html-max-mb``, default 3 MB; 0 = none).
Every picture holds back room for a preview (``PREVIEW_RESERVE``) and a text allowance is set aside, so
a picture whose PNG no longer fits is shown as a small JPEG preview instead (class ``preview``, its
caption says so), and the page stays under budget whatever the pack holds. A PNG is not even tried when
the best bytes-per-pixel seen so far says it cannot fit. Log-mel pictures (small palette PNGs) are
always exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from cook import format as fmt
from cook.packfiles import clip_tokens, visual_embeddings
from cook.types import Pack
from cook.view import media_images as mi
from cook.view.page import text

MEL_MIN_WIDTH_PX: Final = 360  # a short clip's log-mel is stretched to at least this width for reading
PREVIEW_RESERVE: Final = 48_000  # bytes held back per picture for its preview (a 320x320 JPEG, base64)
TEXT_BYTES_PER_TOKEN: Final = 12  # the page's text allowance: about 3x what the demo's packs use
PAGE_BASE_BYTES: Final = 64_000  # CSS, header, tables
StoredFrames = Sequence[tuple[str, bytes]]  # (MIME type, member bytes) per visual frame of a png/jpeg pack


class Pictures:
    """Data URIs of the page's pictures under a byte budget (``None``: every picture exact)."""

    def __init__(self, budget_bytes: int | None, pictures: int, tokens: int) -> None:
        self.left: int | None = None
        if budget_bytes is not None:
            self.left = budget_bytes - PAGE_BASE_BYTES - TEXT_BYTES_PER_TOKEN * tokens - PREVIEW_RESERVE * pictures
        self.previews = 0
        self.least_bytes_per_px = 0.0  # the best PNG ratio seen: a picture predicted not to fit is not tried

    def encode(self, pixels: np.ndarray) -> tuple[str, bool]:
        """uint8 [H, W, 3] -> (data URI, exact): the lossless PNG when it fits, else a JPEG preview."""
        if self.left is None:
            return mi.data_uri(mi.png_bytes(pixels)), True
        self.left += PREVIEW_RESERVE  # this picture's reserve is now its own to spend
        area = pixels.shape[0] * pixels.shape[1]
        if self.left > 0 and area * self.least_bytes_per_px <= self.left:
            uri = mi.data_uri(mi.png_bytes(pixels))
            ratio = len(uri) / area
            self.least_bytes_per_px = ratio if not self.least_bytes_per_px else min(self.least_bytes_per_px, ratio)
            if len(uri) <= self.left:
                self.left -= len(uri)
                return uri, True
        uri = mi.data_uri(mi.preview_bytes(pixels), "image/jpeg")
        self.left -= len(uri)
        self.previews += 1
        return uri, False

    def count(self, uri: str) -> str:
        """A picture that is always exact (a log-mel map): spent from the budget as it is."""
        if self.left is not None:
            self.left -= len(uri)
        return uri


def _pct(part: int, parts: int) -> str:
    return f"{100.0 * part / parts:.4f}%"


def _grid(item: mi.VisualItem, cols: int = 1, rows: int = 1) -> str:
    grid_w, grid_h = cols * item.width_px // fmt.PATCH_SIZE, rows * item.height_px // fmt.PATCH_SIZE
    return f'<span class="grid" style="background-size:{_pct(1, grid_w)} {_pct(1, grid_h)}"></span>'


def _pic(width_px: int, height_px: int) -> str:
    """The opening tag of a picture's box: its stored size and aspect (module docstring, Geometry)."""
    return f'<span class="pic" style="width:{width_px}px;aspect-ratio:{width_px}/{height_px}">'


def _tiles(cols: int, rows: int) -> str:
    """One outline per tile, in raster order, placed in percentages of the picture's box."""
    boxes = "".join(
        f'<span class="tile" data-tile="{r * cols + c}" title="tile {r * cols + c}: row {r}, column {c}" '
        f'style="left:{_pct(c, cols)};top:{_pct(r, rows)};width:{_pct(1, cols)};height:{_pct(1, rows)}"></span>'
        for r in range(rows)
        for c in range(cols)
    )
    return f'<span class="tilegrid">{boxes}</span>'


def _links(anchor: str, exact: bool) -> str:
    if not exact:
        return " · preview: the full-size PNG did not fit the page budget (--html-max-mb 0 keeps every picture)"
    return f' · <a href="#{anchor}">full size</a> · <a href="#top">fit</a>'


def _item_key(item: mi.VisualItem) -> str:
    return f'data-item="{item.index}"'


def _img(css: str, key: str, uri: str, exact: bool, size: tuple[int, int] | None, alt: str, style: str = "") -> str:
    dims = f'width="{size[0]}" height="{size[1]}" ' if size else ""
    styled = f'style="{style}" ' if style else ""
    return f'<img class="{css}{"" if exact else " preview"}" {key} src="{uri}" {dims}{styled}alt="{alt}">'


def image_html(pack: Pack, item: mi.VisualItem, pictures: Pictures, stored: StoredFrames = ()) -> str:
    """An image item: its stored frame member as it is (png/jpeg storage: exactly what the reader
    decodes), else its patches as a PNG (or a preview over the budget)."""
    if stored:
        mime, data = stored[item.first_frame]
        uri, exact = pictures.count(mi.data_uri(data, mime)), True
    else:
        uri, exact = pictures.encode(mi.item_frames(pack, item)[0])
    anchor = f"m{item.index}"
    embeddings = visual_embeddings(item.kind, item.frames, item.height_px, item.width_px)
    size = (item.width_px, item.height_px)
    return (
        f'<span class="item image" id="{anchor}">{_pic(item.width_px, item.height_px)}'
        f"{_img('media', _item_key(item), uri, exact, size, f'image {item.index}')}{_grid(item)}</span>"
        f'<span class="caption">image {item.index}: {item.width_px}x{item.height_px} px, '
        f"{item.width_px // fmt.PATCH_SIZE}x{item.height_px // fmt.PATCH_SIZE} patches, {embeddings} embeddings"
        f"{_links(anchor, exact)}</span></span>"
    )


def tiles_html(pack: Pack, item: mi.VisualItem, pictures: Pictures) -> str:
    tiles = mi.item_frames(pack, item)  # uint8 [tiles, 512, 512, 3], thumbnail last
    cols, rows = mi.tile_layout(tiles)
    whole = mi.assemble_tiles(tiles, cols, rows)
    uri, exact = pictures.encode(whole)
    anchor = f"m{item.index}"
    thumb = ""
    if tiles.shape[0] > 1:
        thumb_uri, thumb_exact = pictures.encode(tiles[-1])
        aspect = f"aspect-ratio:{cols}/{rows}"
        thumb = _img("thumb", "", thumb_uri, thumb_exact, None, f"thumbnail of {item.index}", aspect)
    size = (whole.shape[1], whole.shape[0])
    return (
        f'<span class="item tiles" id="{anchor}">{_pic(*size)}'
        f"{_img('media', _item_key(item), uri, exact, size, f'tiles {item.index}')}"
        f"{_grid(item, cols, rows)}{_tiles(cols, rows)}</span>{thumb}"
        f'<span class="caption">tiles {item.index}: {cols}x{rows} grid of {fmt.TILE_SIZE} px tiles'
        f"{' + thumbnail (drawn at the grid aspect)' if thumb else ''} ({item.frames} tiles, "
        f"{fmt.tiles_embeddings(item.frames)} embeddings){_links(anchor, exact)}</span></span>"
    )


def video_html(pack: Pack, item: mi.VisualItem, labels: list[str | None], pictures: Pictures) -> str:
    uri, exact = pictures.encode(mi.video_strip(mi.item_frames(pack, item)))
    groups = item.frames // fmt.TEMPORAL_PATCH
    embeddings = visual_embeddings("video", item.frames, item.height_px, item.width_px)
    anchor = f"m{item.index}"
    names = [
        text(label) if label else f"frames {2 * g + 1}-{2 * g + 2}"
        for g, label in enumerate([*labels[:groups], *[None] * max(0, groups - len(labels))])
    ]
    return (
        f'<span class="item video" id="{anchor}"><span class="strip"><span class="reel">'
        f"{_img('media', _item_key(item), uri, exact, None, f'video {item.index}')}"
        f'<span class="labels" style="grid-template-columns:repeat({groups},1fr)">'
        + "".join(f'<span class="label">{name}</span>' for name in names)
        + f'</span></span></span><span class="caption">video {item.index}: {item.frames} frames of '
        f"{item.width_px}x{item.height_px} px, {groups} groups of {fmt.TEMPORAL_PATCH}, "
        f"{embeddings} embeddings{_links(anchor, exact)}</span></span>"
    )


def clip_html(pack: Pack, clip: int, tokens: int, pictures: Pictures) -> str:
    assert pack.audio_features is not None and pack.audio_lengths is not None
    valid = int(pack.audio_lengths[clip])
    stored = pack.audio_features.shape[1]
    picture = mi.mel_picture(pack.audio_features[clip], valid)
    seconds = valid * fmt.AUDIO_HOP / fmt.AUDIO_SAMPLE_RATE_HZ
    return (
        f'<span class="item audio" id="a{clip}"><span class="mel">'
        f'<img class="media" data-clip="{clip}" src="{pictures.count(mi.data_uri(mi.png_bytes(picture)))}" '
        f'style="width:{max(picture.width, MEL_MIN_WIDTH_PX)}px" alt="audio clip {clip}"></span>'
        f'<span class="caption">audio clip {clip}: log-mel, {fmt.MEL_BINS} bins x {valid} valid frames '
        f"({seconds:.2f} s) of {stored} stored; the red mark ends the valid frames; {tokens} tokens</span></span>"
    )


class MediaCursor:
    """The next visual item and audio clip of the pack, consumed in placeholder order."""

    def __init__(self, pack: Pack, budget_bytes: int | None = None, stored: StoredFrames = ()) -> None:
        self.pack = pack
        self.stored = stored
        self.items = mi.visual_items(pack)
        thumbnails = sum(item.kind == "tiles" and item.frames > 1 for item in self.items)
        self.pictures = Pictures(budget_bytes, len(self.items) + thumbnails, pack.padded_tokens)
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
                out = video_html(self.pack, item, labels, self.pictures)
            elif item.kind == "tiles":
                out = tiles_html(self.pack, item, self.pictures)
            else:
                out = image_html(self.pack, item, self.pictures, self.stored)
        self.used += tokens
        if self.used >= visual_embeddings(item.kind, item.frames, item.height_px, item.width_px):
            self.item, self.used = self.item + 1, 0
        return out

    def audio_run(self, tokens: int) -> str:
        """HTML for a run of ``tokens`` ``<so_embedding>`` tokens: the clips whose tokens fill it."""
        out, taken = [], 0
        while taken < tokens and self.clip < len(self.clip_tokens):
            out.append(clip_html(self.pack, self.clip, self.clip_tokens[self.clip], self.pictures))
            taken += self.clip_tokens[self.clip]
            self.clip += 1
        return "".join(out)
