"""The demo dataset plus records that try to inject markup, cooked once per test module, and the checks
every pack page must pass (tests/e2e/test_inspect_html.py with Python's parser, test_browser_pages.py
with Chromium's DOM); two generated photos cooked in tiles or plain image mode (picture geometry)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from cook import format as fmt
from cook.cli.main import main
from cook.packfiles import find_pack
from cook.types import Pack
from cook.validate.members import parse_pack
from tests.conftest import DEMO_DATA, DEMO_TOKENIZER, REPO, write_jsonl
from tests.unit.view.dom import Element, find, target_run_count

SCRIPT = "<script>alert('x')</script>"
ONERROR = "<img src=x onerror=alert(1)>"
EVIL = [
    {"messages": [{"role": "user", "content": f"Hello {SCRIPT}"}, {"role": "assistant", "content": f"Sure {ONERROR}"}]},
    {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image", "image": "media/wide.jpg"}, {"type": "text", "text": ONERROR}],
            },
            {"role": "assistant", "content": f"</span></div>{SCRIPT}<style>body{{display:none}}</style>"},
        ]
    },
]


def cook_demo_with_evil(tmp: Path, *extra: str) -> Path:
    """``pipelines/demo.yaml`` on a copy of the demo data plus ``evil.jsonl`` (EVIL) -> the dataset dir;
    ``extra``: more ``--set`` overrides."""
    data = tmp / "data"
    shutil.copytree(DEMO_DATA, data)
    write_jsonl(data / "evil.jsonl", EVIL)
    out = tmp / "out"
    sets = [f"input.path={data}", f"input.media_root={data / 'media'}", f"tokenizer.path={DEMO_TOKENIZER}", *extra]
    argv = ["run", str(REPO / "pipelines" / "demo.yaml"), "--output", str(out), "--workers", "0", "--quiet"]
    assert main(argv + [arg for s in sets for arg in ("--set", s)]) == 0
    return out


PHOTOS = {
    "photo43.png": (800, 600),
    "square.png": (400, 400),
}  # tiles mode, 12 tiles at most: 4x3 (+ thumbnail) and 1x1


def photo(width_px: int, height_px: int) -> np.ndarray:
    """uint8 [H, W, 3]: a red ramp left to right, a green ramp top to bottom and a 50 px checkerboard in
    blue, so every tile of it differs and the page shows at a glance where a tile was cut."""
    y, x = np.mgrid[0:height_px, 0:width_px]
    blue = ((x // 50 + y // 50) % 2) * 200
    return np.stack([x * 255 // width_px, y * 255 // height_px, blue], axis=-1).astype(np.uint8)


def cook_photos(tmp: Path, mode: str) -> Path:
    """``pipelines/nano_vl_sft.yaml`` (image mode ``mode``) on two records, one photo each (PHOTOS), one
    pack -> the dataset dir."""
    data = tmp / "data"
    data.mkdir(parents=True)
    for name, (width_px, height_px) in PHOTOS.items():
        Image.fromarray(photo(width_px, height_px)).save(data / name)
    write_jsonl(
        data / "photos.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "image": name}, {"type": "text", "text": "What?"}]},
                    {"role": "assistant", "content": "A test card."},
                ]
            }
            for name in PHOTOS
        ],
    )
    out = tmp / "out"
    sets = [
        f"input.path={data}",
        f"input.media_root={data}",
        f"tokenizer.path={DEMO_TOKENIZER}",
        f"media.image.mode={mode}",
        "media.image.storage=raw",  # the pages' pixels against the raw patches (stored frames: test_stored_frames)
        "media.video.storage=raw",
    ]
    argv = ["run", str(REPO / "pipelines" / "nano_vl_sft.yaml"), "--output", str(out), "--workers", "0", "--quiet"]
    assert main(argv + [arg for s in sets for arg in ("--set", s)]) == 0
    return out


def load_pack(root: Path, index: int) -> Pack:
    found = find_pack(str(root), index)
    assert found is not None
    pack, findings = parse_pack(found[1])
    assert pack is not None, findings
    return pack


def media_packs(root: Path) -> dict[int, Pack]:
    """Index -> pack, for every pack that holds media."""
    packs = json.loads((root / fmt.MANIFEST_NAME).read_text())["counts"]["packs"]
    found = {i: load_pack(root, i) for i in range(packs)}
    return {i: p for i, p in found.items() if p.media_sizes is not None or p.audio_lengths is not None}


def check_page(elements: list[Element], pack: Pack) -> None:
    """The DOM checks of issue 19: media <img> = visual items + audio clips, one target span per target
    run (and their tokens = the targets), no <script>, no event-handler attribute, images only inline."""
    visual = 0 if pack.media_sizes is None else pack.media_sizes.shape[0]
    clips = 0 if pack.audio_lengths is None else pack.audio_lengths.shape[0]
    assert len(find(elements, "img", "media")) == visual + clips
    starts = pack.cu_seqlens_padded
    runs = sum(target_run_count(pack.loss_mask[starts[i] : starts[i + 1]]) for i in range(len(pack.sequences)))
    spans = find(elements, "span", "target")
    assert len(spans) == runs
    assert sum(int(e.attrs["data-tokens"]) for e in spans) == int(np.count_nonzero(pack.loss_mask))
    assert not find(elements, "script")
    assert [e.tag for e in elements if e.tag == "style"] == ["style"]  # ours, in <head>
    assert all(not name.startswith("on") for e in elements for name in e.attrs)
    for img in find(elements, "img"):
        mime = "jpeg" if "preview" in img.classes else "png"
        assert img.attrs.get("src", "").startswith(f"data:image/{mime};base64,")
    assert len(find(elements, "section", "sequence")) == len(pack.sequences)
