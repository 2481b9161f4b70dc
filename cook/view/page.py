"""The page shell shared by the pack and stats pages: CSS, escaping of data text, the output-path check.

Data text (decoded tokens, sources, keys, paths, reject details) only ever reaches the page through
``text()``: ``html.escape`` (quotes included) after control characters are made visible as ``\\xNN``, so
a record holding ``<script>`` or ``<img onerror=...>`` shows those characters and nothing runs. The page
has no script at all, and a Content-Security-Policy that allows none (defence in depth): styles and
``data:`` images only.
"""

from __future__ import annotations

import html
from typing import Final

CONTROL_CHARS: Final = {c: f"\\x{c:02x}" for c in [*range(32), 127, *range(0x80, 0xA0)] if c not in (9, 10)}
CSP: Final = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main,header.top{max-width:1180px;margin:0 auto;padding:12px 20px}
h1{font-size:20px;margin:8px 0}h1 small,h2 small{font-weight:normal;color:#666;font-size:13px}
h2{font-size:16px;margin:0 0 4px}
table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;border-bottom:1px solid #e3e3e3;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.fill{display:flex;height:18px;border:1px solid #999;background:#fff;margin:6px 0}
.fill span{display:block;height:100%}
.sw{display:inline-block;width:12px;height:12px;border:1px solid #999;vertical-align:-2px;margin:0 3px 0 10px}
.tok{background:#4c72b0}.padm{background:#f0b060}
.tail{background:repeating-linear-gradient(45deg,#ddd 0 4px,#fff 4px 8px)}
.sw.tgt{background:#d5f5d0;border-color:#3a9a3a}
.legend{color:#444;font-size:13px}
section.sequence{background:#fff;border:1px solid #ddd;border-radius:6px;margin:14px 0;padding:10px 14px}
section.picked{border:2px solid #e0a030}tr.picked{background:#fdf0d0}
.facts{color:#555;font-size:13px;margin:0 0 8px}
.text{white-space:pre-wrap;word-break:break-word;font:13px/1.55 ui-monospace,Menlo,Consolas,monospace}
.target{background:#d5f5d0;box-shadow:inset 0 -2px #3a9a3a}
.chip{display:inline-block;font:10px/1.3 system-ui,sans-serif;background:#e8e8f0;color:#334;border:1px solid #b8b8cc;
 border-radius:4px;padding:0 4px;margin:0 1px;vertical-align:1px;white-space:nowrap}
.chip.pad{background:#f7ead2;border-color:#d9b77a}.chip.media{background:#dde8f8;border-color:#8aa8d8}
.role{display:block;border-top:2px solid #bbb;margin-top:10px;padding-top:3px;font-weight:600;color:#333}
.role-user{border-color:#6b8fd6}.role-assistant{border-color:#3a9a3a}.role-system{border-color:#999}.role-tool{border-color:#c08a2a}
.item{display:block;margin:6px 0 8px;white-space:normal;font:12px/1.4 system-ui,sans-serif;color:#444}
.pic{position:relative;display:inline-block;vertical-align:top;max-width:min(100%,420px);outline:1px solid #ccc}
.item:target .pic{max-width:none}
.pic img,.grid,.tilegrid,.tile{position:absolute;display:block}
.pic img,.grid,.tilegrid{inset:0;width:100%;height:100%}
.grid,.tilegrid{pointer-events:none}
.grid{display:none;background-image:linear-gradient(to right,rgba(0,220,255,.7) 1px,transparent 1px),
 linear-gradient(to bottom,rgba(0,220,255,.7) 1px,transparent 1px)}
.tile{box-shadow:inset 0 0 0 1px #e33}
#show-grid:checked~main .grid{display:block}
img.thumb{height:128px;width:auto;outline:1px solid #ccc;margin-left:8px;vertical-align:top}
.strip{display:block;max-width:100%;overflow-x:auto}.reel{display:inline-block;vertical-align:top}
.strip img{height:128px;width:auto;border:1px solid #ccc;display:block}
.item:target .strip img{height:auto}
.labels{display:grid;gap:0 4px;font-size:11px;color:#333}
.labels span{border-top:2px solid #8aa8d8;padding:1px 2px}
.mel{display:block;max-width:100%;overflow-x:auto}.mel img{height:128px;image-rendering:pixelated;border:1px solid #ccc}
.caption{display:block;margin-top:2px}
a{color:#2a5db0}
"""


def text(value: object) -> str:
    """Data text -> safe HTML text: control characters as ``\\xNN``, then ``html.escape`` (quotes too)."""
    return html.escape(str(value).translate(CONTROL_CHARS), quote=True)


def page(title: str, body: str) -> str:
    """One self-contained document; ``title`` is data text (escaped here), ``body`` is already HTML."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
