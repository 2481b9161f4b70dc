"""The pages in a real browser: headless Chromium parses the page (``--dump-dom``, the DOM after
Chromium's own HTML parsing), the issue-19 DOM checks run on that, and a screenshot is not blank.

Picture geometry (issue 33): the page is loaded, as written, into a frame of a given width inside a small
harness page whose script ticks the patch-grid box and writes the rendered boxes (``getBoundingClientRect``)
of every picture, its patch grid, its tile outlines and its thumbnail into the DOM that ``--dump-dom``
prints; the outlines must sit on the photo within ``TOLERANCE_PX`` in two viewport widths (a frame, since
a headless window is at least 500 px wide) and at full size.

Marked ``browser``; skipped where no Chromium is installed (``make test-browser`` installs Debian's
``chromium`` when it is missing, then runs these). ``COOK_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cook.cli.main import main
from cook.media.tiles import choose_tiles
from cook.types import Pack
from tests.e2e.html_data import (
    ONERROR,
    PHOTOS,
    SCRIPT,
    check_page,
    cook_demo_with_evil,
    cook_photos,
    load_pack,
    media_packs,
)
from tests.unit.view.dom import find, parse

CHROMIUM = os.environ.get("COOK_CHROMIUM") or next(
    (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (make test-browser installs one)"),
]
GUARD_S = 180  # a hung browser fails the test instead of hanging the suite (not a speed assertion)


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=GUARD_S, check=True)


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_demo_with_evil(tmp_path_factory.mktemp("browser"))


def _write(root: Path, out: Path, *select: str) -> Path:
    assert main(["inspect", str(root), *select, "--html", str(out)]) == 0
    return out


def test_chromium_dom_passes_the_checks_for_every_media_pack(cooked: Path, tmp_path: Path) -> None:
    for index, pack in media_packs(cooked).items():
        page = _write(cooked, tmp_path / f"pack{index}.html", "--pack", str(index))
        dom = _chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
        assert "</html>" in dom
        check_page(parse(dom), pack)


def test_chromium_runs_no_markup_from_the_data(cooked: Path, tmp_path: Path) -> None:
    page = _write(cooked, tmp_path / "evil.html", "--source", "evil.jsonl#2")
    dom = _chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    elements = parse(dom)
    index = next(i for i in range(64) if any(s.source.endswith("evil.jsonl#2") for s in load_pack(cooked, i).sequences))
    check_page(elements, load_pack(cooked, index))
    shown = "".join(t for e in find(elements, "div", "text") for t in e.text)
    assert SCRIPT in shown and ONERROR in shown and "<style>body{display:none}</style>" in shown


def test_screenshot_is_not_blank(cooked: Path, tmp_path: Path) -> None:
    index = next(i for i, p in media_packs(cooked).items() if any("video" in s.media for s in p.sequences))
    page = _write(cooked, tmp_path / "video.html", "--pack", str(index))
    shot = tmp_path / "shot.png"
    _chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri())
    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.shape[:2] == (1600, 1280)
    colours = np.unique(pixels.reshape(-1, 3)[::7], axis=0).shape[0]
    assert colours > 500 and pixels.std() > 20  # text, chips, frames and the mel picture, not one flat colour


TOLERANCE_PX = 1.0
MAX_TILES = 12  # pipelines/nano_vl_sft.yaml
PICTURE_MAX_PX = 420  # page.py: a picture is shown at most this wide (or the room there is) until #m<row>
THUMB_PX = 128  # page.py: the thumbnail's height
HARNESS = """<!DOCTYPE html>
<html><body style="margin:0">
<iframe id="page" style="border:0;width:{width_px}px;height:1600px" srcdoc="{page}"></iframe>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {{
  if ("{fragment}") frame.contentWindow.location.hash = "{fragment}";
  const doc = frame.contentDocument;
  doc.getElementById("show-grid").checked = true;
  const box = (e) => {{ const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }};
  const pictures = [...doc.querySelectorAll(".pic")].map((pic) => ({{
    item: Number(pic.querySelector("img.media").dataset.item),
    photo: box(pic.querySelector("img.media")),
    box: box(pic),
    grid: box(pic.querySelector(".grid")),
    tiles: [...pic.querySelectorAll(".tile")].map((t) => [Number(t.dataset.tile), ...box(t)]),
    thumbs: [...pic.parentElement.querySelectorAll("img.thumb")].map(box),
    room: pic.parentElement.clientWidth,
    viewport: frame.contentWindow.innerWidth,
  }}));
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify(pictures);
  document.body.append(out);
}});
</script></body></html>"""


def _measured(page: Path, tmp: Path, width_px: int, fragment: str = "") -> list[dict]:
    """The rendered boxes of the page's pictures in a viewport ``width_px`` wide (HARNESS: the page as it
    is, CSP included, in a same-origin ``srcdoc`` frame of that width, measured by the harness's script)."""
    harness = tmp / f"measure-{page.stem}.html"
    source = html.escape(page.read_text(encoding="utf-8"), quote=True)
    harness.write_text(HARNESS.format(width_px=width_px, page=source, fragment=fragment), encoding="utf-8")
    dom = _chromium(tmp / "profile", "--dump-dom", "--window-size=1400,1700", harness.as_uri())
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.S)
    assert found is not None, dom.stdout[-500:]
    pictures: list[dict] = json.loads(html.unescape(found.group(1)))
    assert all(p["viewport"] == width_px for p in pictures)
    return pictures


def _near(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= TOLERANCE_PX for x, y in zip(a, b, strict=True))


def _check_picture(found: dict, grid: tuple[int, int] | None, stored: tuple[int, int]) -> None:
    """The box and the patch grid are the photo, which keeps the stored aspect; in tiles mode (``grid`` =
    cols, rows) tile k's outline is the photo's cell (row k // cols, column k % cols) and the thumbnail
    has the photo's aspect; a plain image has no outline."""
    x, y, w, h = found["photo"]
    assert w > 0 and abs(h - w * stored[1] / stored[0]) <= TOLERANCE_PX, found
    assert _near(found["box"], found["photo"]) and _near(found["grid"], found["photo"]), found
    if grid is None:
        assert found["tiles"] == [] and found["thumbs"] == []
        return
    cols, rows = grid
    cells = {k: [x + (k % cols) * w / cols, y + (k // cols) * h / rows, w / cols, h / rows] for k in range(cols * rows)}
    assert sorted(k for k, *_ in found["tiles"]) == sorted(cells)
    for k, *rect in found["tiles"]:
        assert _near(rect, cells[k]), (k, rect, cells[k])
    assert len(found["thumbs"]) == (cols * rows > 1)
    for thumb in found["thumbs"]:
        assert abs(thumb[3] - THUMB_PX) <= TOLERANCE_PX and abs(thumb[2] - THUMB_PX * w / h) <= TOLERANCE_PX, thumb


@pytest.fixture(scope="module")
def photo_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Pack]]:
    """Image mode -> (the page of pack 0, the pack): PHOTOS cooked as tiles and as plain images."""
    tmp = tmp_path_factory.mktemp("photos")
    out = {}
    for mode in ("tiles", "dynamic"):
        root = cook_photos(tmp / mode, mode)
        out[mode] = (_write(root, tmp / f"{mode}.html", "--pack", "0", "--html-max-mb", "0"), load_pack(root, 0))
    return out


@pytest.mark.parametrize("width_px", [1280, 360])
@pytest.mark.parametrize("mode", ["tiles", "dynamic"])
def test_tile_outlines_and_patch_grid_sit_on_the_photo(photo_pages, tmp_path: Path, mode: str, width_px: int) -> None:
    """A 4x3 tile photo and a single-tile photo (tiles mode), and the same photos as plain images: every
    overlay box is the photo's box, on a wide page and on one narrower than the picture cap, and with the
    first picture at full size (``#m0``)."""
    grids = [choose_tiles(*size, MAX_TILES) if mode == "tiles" else None for size in PHOTOS.values()]
    assert grids == ([(4, 3), (1, 1)] if mode == "tiles" else [None, None])
    page, pack = photo_pages[mode]
    assert pack.media_sizes is not None
    for fragment in ("", "m0"):
        pictures = _measured(page, tmp_path, width_px, fragment)
        assert [p["item"] for p in pictures] == [0, 1]
        for found, grid, (frames, height_px, stored_w) in zip(pictures, grids, pack.media_sizes.tolist(), strict=True):
            cols, rows = grid or (1, 1)
            assert frames == (cols * rows + 1 if cols * rows > 1 else 1)
            stored = (stored_w * cols, height_px * rows)  # the picture: the tile grid, or the image
            assert (found["room"] < PICTURE_MAX_PX) == (width_px == 360)
            full = fragment == "m0" and found["item"] == 0
            shown = stored[0] if full else min(stored[0], PICTURE_MAX_PX, found["room"])
            assert abs(found["photo"][2] - shown) <= TOLERANCE_PX, (mode, fragment, found)
            _check_picture(found, grid, stored)
