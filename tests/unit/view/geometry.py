"""The picture geometry a pack page emits, read back from its DOM and checked against the pack: each picture
box (``span.pic``: stored width and aspect), the patch grid and the tile outlines placed in percentages of
it, and the pixels under each tile outline (the tile ``cook/media/tiles.py`` cut there). Used on
hand-made packs (tests/unit/view/test_geometry.py) and on cooked ones (tests/e2e/test_inspect_html.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from cook.types import Pack
from tests.unit.view.dom import Element, picture

TILE_PX = 512
PATCH_PX = 16
_DECLARATION = re.compile(r"\s*([a-z-]+)\s*:\s*([^;]+?)\s*(?:;|$)")


@dataclass
class Drawn:
    """One ``span.pic`` and what the page draws in and next to it."""

    style: dict[str, str]
    item: int = -1  # data-item of its img.media
    pixels: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3), np.uint8))  # uint8 [H, W, 3]
    grid: dict[str, str] = field(default_factory=dict)  # the patch grid's style
    tiles: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # (data-tile, style)
    thumb: dict[str, str] | None = None  # the thumbnail's style

    @property
    def box_px(self) -> tuple[int, int]:
        """(width, height) of the box from its style: ``width: W px; aspect-ratio: W/H``."""
        width = self.style["width"].removesuffix("px")
        ratio_w, ratio_h = self.style["aspect-ratio"].split("/")
        assert width == ratio_w, self.style
        return int(width), int(ratio_h)


def declarations(element: Element) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _DECLARATION.finditer(element.attrs.get("style", ""))}


def drawn(elements: list[Element]) -> list[Drawn]:
    """The page's picture boxes in document order (a tile outline or a thumbnail belongs to the box before it)."""
    out: list[Drawn] = []
    for e in elements:
        if e.tag == "span" and "pic" in e.classes:
            out.append(Drawn(declarations(e)))
        elif e.tag == "img" and "media" in e.classes and out and out[-1].item < 0:
            out[-1].item, out[-1].pixels = int(e.attrs["data-item"]), picture(e)
        elif e.tag == "span" and "grid" in e.classes:
            out[-1].grid = declarations(e)
        elif e.tag == "span" and "tile" in e.classes:
            out[-1].tiles.append((int(e.attrs["data-tile"]), declarations(e)))
        elif e.tag == "img" and "thumb" in e.classes:
            out[-1].thumb = declarations(e)
    return out


def to_px(percent: str, whole_px: int) -> int:
    """``"33.3333%"`` of ``whole_px`` -> whole pixels; the page's 4 decimals land within 0.05 px of one."""
    value = float(percent.removesuffix("%")) * whole_px / 100
    assert abs(value - round(value)) < 0.05, (percent, whole_px)
    return round(value)


def tile_rect(style: dict[str, str], width_px: int, height_px: int) -> tuple[int, int, int, int]:
    """A tile outline's (x, y, w, h) in pixels of the picture."""
    return (
        to_px(style["left"], width_px),
        to_px(style["top"], height_px),
        to_px(style["width"], width_px),
        to_px(style["height"], height_px),
    )


def stored_frames(pack: Pack) -> list[list[np.ndarray]]:
    """Per media_sizes row: its frames uint8 [H, W, 3], unpatchified by SPEC §6 directly
    (``patch[c*256 + y*16 + x] = pixel[row*16 + y, col*16 + x, c]``)."""
    assert pack.media_sizes is not None and pack.pixel_patches is not None
    out, first = [], 0
    for frames, height, width in pack.media_sizes.tolist():
        per = (height // PATCH_PX) * (width // PATCH_PX)
        shaped = pack.pixel_patches[first : first + frames * per].reshape(
            frames, height // PATCH_PX, width // PATCH_PX, 3, PATCH_PX, PATCH_PX
        )  # [F, gh, gw, C, y, x]
        out.append(list(shaped.transpose(0, 1, 4, 2, 5, 3).reshape(frames, height, width, 3)))
        first += frames * per
    return out


def check_geometry(elements: list[Element], pack: Pack) -> int:
    """Every image and tiles item is one box of its stored size holding exactly its picture; the patch grid
    has one cell per 16 px; tile outline k covers exactly the pixels of stored tile k, the outlines cover
    the picture once; the thumbnail is drawn at the grid's aspect. Returns the tile outlines checked."""
    kinds = [k for s in pack.sequences for k in s.media if k != "audio"]
    sizes = pack.media_sizes.tolist() if pack.media_sizes is not None else []
    boxes = {d.item: d for d in drawn(elements)}
    assert sorted(boxes) == [row for row, kind in enumerate(kinds) if kind in ("image", "tiles")]
    frames = stored_frames(pack) if sizes else []
    outlines = 0
    for row, box in boxes.items():
        height_px, width_px = box.pixels.shape[:2]
        assert box.box_px == (width_px, height_px)
        cell = (
            to_px(box.grid["background-size"].split()[0], width_px),
            to_px(box.grid["background-size"].split()[1], height_px),
        )
        assert cell == (PATCH_PX, PATCH_PX)
        count, stored_h, stored_w = sizes[row]
        if kinds[row] == "image":
            assert (height_px, width_px) == (stored_h, stored_w) and not box.tiles and box.thumb is None
            continue
        cols, rows = width_px // TILE_PX, height_px // TILE_PX
        assert (cols * TILE_PX, rows * TILE_PX) == (width_px, height_px) and cols * rows == max(1, count - 1)
        assert [k for k, _ in box.tiles] == list(range(cols * rows))
        covered = np.zeros((height_px, width_px), np.int32)
        for k, style in box.tiles:
            x, y, w, h = tile_rect(style, width_px, height_px)
            assert (x, y, w, h) == (k % cols * TILE_PX, k // cols * TILE_PX, TILE_PX, TILE_PX)
            assert np.array_equal(box.pixels[y : y + h, x : x + w], frames[row][k])
            covered[y : y + h, x : x + w] += 1
        assert (covered == 1).all()
        assert box.thumb == ({"aspect-ratio": f"{cols}/{rows}"} if count > 1 else None)
        outlines += len(box.tiles)
    return outlines
