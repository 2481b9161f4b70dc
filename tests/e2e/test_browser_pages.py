"""The pages in a real browser: headless Chromium parses the page (``--dump-dom``, the DOM after
Chromium's own HTML parsing), the issue-19 DOM checks run on that, and a screenshot is not blank.

Marked ``browser``; skipped where no Chromium is installed (``make test-browser`` installs Debian's
``chromium`` when it is missing, then runs these). ``COOK_CHROMIUM`` names another binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cook.cli.main import main
from tests.e2e.html_data import ONERROR, SCRIPT, check_page, cook_demo_with_evil, load_pack, media_packs
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
