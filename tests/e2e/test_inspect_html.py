"""``cook inspect --html`` and ``cook stats --html`` on the cooked demo (plus markup-injecting records):
the DOM checks on every pack with media, pixels equal to the stored patches, escaping, the stats page,
and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cook import format as fmt
from cook.cli.main import main
from tests.e2e.html_data import ONERROR, SCRIPT, check_page, cook_demo_with_evil, load_pack, media_packs
from tests.unit.view.dom import find, parse, picture
from tests.unit.view.geometry import check_geometry


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_demo_with_evil(tmp_path_factory.mktemp("html"))


def _page(root: Path, tmp: Path, *select: str) -> str:
    out = tmp / "page.html"
    assert main(["inspect", str(root), *select, "--html", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_every_media_pack_passes_the_dom_checks(cooked: Path, tmp_path: Path) -> None:
    packs = media_packs(cooked)
    kinds = {k for p in packs.values() for s in p.sequences for k in s.media}
    assert kinds == {"image", "video", "audio"}
    for index, pack in packs.items():
        check_page(parse(_page(cooked, tmp_path, "--pack", str(index))), pack)


def _naive_image(patches: np.ndarray, height: int, width: int) -> np.ndarray:
    """The SPEC §6 layout spelled out: patch[c*256 + y*16 + x] = pixel[row*16+y, col*16+x, c]."""
    out = np.zeros((height, width, 3), np.uint8)
    grid_w = width // 16
    for k, patch in enumerate(patches):
        row, col = divmod(k, grid_w)
        out[row * 16 : row * 16 + 16, col * 16 : col * 16 + 16] = patch.reshape(3, 16, 16).transpose(1, 2, 0)
    return out


def test_images_are_the_stored_patches_at_full_size(cooked: Path, tmp_path: Path) -> None:
    index, pack = next(
        (i, p) for i, p in media_packs(cooked).items() if p.sequences and "image" in p.sequences[0].media
    )
    elements = parse(_page(cooked, tmp_path, "--pack", str(index)))
    assert pack.media_sizes is not None and pack.pixel_patches is not None
    first = 0
    media = {e.attrs.get("data-item"): e for e in find(elements, "img", "media")}
    kinds = [k for s in pack.sequences for k in s.media if k != "audio"]
    for row, (kind, (frames, height, width)) in enumerate(zip(kinds, pack.media_sizes.tolist(), strict=True)):
        count = frames * (height // 16) * (width // 16)
        if kind == "image":
            shown = picture(media[str(row)])
            assert shown.shape == (height, width, 3)
            assert np.array_equal(shown, _naive_image(pack.pixel_patches[first : first + count], height, width))
        first += count


def test_video_strip_has_a_label_per_frame_group(cooked: Path, tmp_path: Path) -> None:
    index, pack = next((i, p) for i, p in media_packs(cooked).items() if any("video" in s.media for s in p.sequences))
    elements = parse(_page(cooked, tmp_path, "--pack", str(index)))
    video = find(elements, "span", "video")
    assert len(video) == 1
    labels = ["".join(e.text) for e in find(elements, "span", "label")]
    kinds = [k for s in pack.sequences for k in s.media if k != "audio"]
    assert pack.media_sizes is not None
    frames = int(pack.media_sizes[kinds.index("video"), 0])
    assert len(labels) == frames // 2
    assert [label.split(" sampled at ")[0] for label in labels] == [f"Frame {g + 1}" for g in range(frames // 2)]
    assert all(label.endswith(" seconds") for label in labels)


@pytest.mark.parametrize("line", [1, 2])
def test_markup_in_records_renders_as_text(cooked: Path, tmp_path: Path, line: int) -> None:
    page = _page(cooked, tmp_path, "--source", f"evil.jsonl#{line}")
    elements = parse(page)
    index = next(
        i for i in range(64) if any(s.source.endswith(f"evil.jsonl#{line}") for s in load_pack(cooked, i).sequences)
    )
    check_page(elements, load_pack(cooked, index))
    shown = "".join(t for e in find(elements, "div", "text") for t in e.text)
    assert SCRIPT in shown and ONERROR in shown
    assert "<script" not in page.replace("&lt;script", "")
    if line == 2:
        assert "</span></div>" in shown and "<style>body{display:none}</style>" in shown
    (picked,) = [e for e in find(elements, "section", "picked")]
    assert SCRIPT in "".join(picked.text) or ONERROR in "".join(picked.text)
    assert len([e for e in find(elements, "tr") if "picked" in e.classes]) == 1


def test_without_a_tokenizer_the_page_shows_ids_and_the_media(cooked: Path, tmp_path: Path) -> None:
    index, pack = next(iter(media_packs(cooked).items()))
    page = _page(cooked, tmp_path, "--pack", str(index), "--tokenizer", str(tmp_path / "none"))
    check_page(parse(page), pack)


def test_html_path_that_cannot_be_written_exits_2_before_work(cooked: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "missing" / "page.html"
    assert main(["inspect", str(cooked), "--html", str(target)]) == 2
    assert main(["stats", str(cooked), "--html", str(target)]) == 2
    assert main(["inspect", str(cooked), "--html", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "is a directory" in err
    assert not target.parent.exists()


def test_stats_page_has_the_plots_the_files_and_the_rejects(cooked: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats.html"
    assert main(["stats", str(cooked), "--html", str(out), "--json"]) == 0
    elements = parse(out.read_text(encoding="utf-8"))
    (plot,) = find(elements, "img", "plot")
    assert picture(plot).shape[0] > 400
    manifest = json.loads((cooked / fmt.MANIFEST_NAME).read_text())
    tables = {e.attrs["class"]: e for e in find(elements, "table") if "class" in e.attrs}
    files = sorted(p.name for p in (cooked.parent / "data").iterdir() if p.suffix in (".jsonl", ".tar"))
    cells = [c for c in tables["sources"].text if c.strip()]
    assert [c for c in cells if c in files] == files
    rows = {}
    reject_cells = [c for c in tables["rejects"].text if c.strip()]
    for reason in manifest["rejects_by_reason"]:
        rows[reason] = int(reject_cells[reject_cells.index(reason) + 1])
    assert rows == manifest["rejects_by_reason"]
    assert not find(elements, "script")


def test_html_max_mb_must_not_be_negative_and_0_lifts_the_budget(cooked: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "page.html"
    assert main(["inspect", str(cooked), "--html", str(out), "--html-max-mb", "-1"]) == 2
    assert "--html-max-mb" in capsys.readouterr().err and not out.exists()
    index, pack = next(iter(media_packs(cooked).items()))
    assert main(["inspect", str(cooked), "--pack", str(index), "--html", str(out), "--html-max-mb", "0"]) == 0
    elements = parse(out.read_text(encoding="utf-8"))
    check_page(elements, pack)
    assert not find(elements, "img", "preview")


@pytest.mark.slow  # a tiles cook and its pages: ~4 s
def test_tiles_mode_pages_show_each_grid_its_outlines_and_its_thumbnail(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = cook_demo_with_evil(tmp_path_factory.mktemp("tiles"), "media.image.mode=tiles", "media.image.max_tiles=6")
    tmp = tmp_path_factory.mktemp("tiles_pages")
    seen = outlines = 0
    for index, pack in media_packs(root).items():
        elements = parse(_page(root, tmp, "--pack", str(index), "--html-max-mb", "0"))
        check_page(elements, pack)
        outlines += check_geometry(elements, pack)  # each tile outline over the pixels of its stored tile
        kinds = [k for s in pack.sequences for k in s.media if k != "audio"]
        assert pack.media_sizes is not None or not kinds
        tiles = [int(pack.media_sizes[row, 0]) for row, k in enumerate(kinds) if k == "tiles"] if kinds else []
        assert len(find(elements, "img", "thumb")) == sum(n > 1 for n in tiles)
        media = {e.attrs.get("data-item"): e for e in find(elements, "img", "media")}
        for row, kind in enumerate(kinds):
            if kind != "tiles":
                continue
            seen += 1
            shown = picture(media[str(row)])
            cells = shown.shape[0] // 512 * (shown.shape[1] // 512)
            assert shown.shape[0] % 512 == 0 and shown.shape[1] % 512 == 0
            assert cells == max(1, int(pack.media_sizes[row, 0]) - 1)  # the grid: every tile but the thumbnail
    assert seen >= 5 and outlines >= seen
