"""A page's DOM as the checks need it, from the standard library's HTML parser (the same checks run on
Chromium's ``--dump-dom`` in tests/e2e/test_browser_pages.py)."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from html.parser import HTMLParser

import numpy as np
from PIL import Image

VOID = {"img", "br", "input", "meta", "link", "hr", "source", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text.append(data)


def parse(page: str) -> list[Element]:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector.elements


def find(elements: list[Element], tag: str, css: str | None = None) -> list[Element]:
    return [e for e in elements if e.tag == tag and (css is None or css in e.classes)]


def picture(img: Element, mime: str = "image/png") -> np.ndarray:
    """The pixels of an ``<img src="data:image/png;base64,...">``: uint8 [H, W, 3] (or [H, W] for palette)."""
    src = img.attrs["src"]
    assert src.startswith(f"data:{mime};base64,"), src[:40]
    with Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))) as image:
        return np.asarray(image.convert("RGB") if image.mode == "RGB" else image)


def target_run_count(mask: np.ndarray) -> int:
    """Maximal runs of mask == 1, counted naively."""
    runs, previous = 0, 0
    for value in mask.tolist():
        runs += bool(value) and not previous
        previous = value
    return runs
