"""``cook inspect --html`` on a 16k-token pack with images: page size and time to write it.

Two datasets, cooked by ``cook run`` in-process (pipelines/demo.yaml with production image settings,
``min_patches`` 1024, ``max_patches`` 13312, ``seq_len`` 16384) and cached in bench/_work:
- demo media: conversations with 1-3 of the demo's images each (tests/assets/demo_data/media, smooth
  generated pictures, upscaled by cook to >= 1024 patches);
- photos: conversations with one real photograph each (matplotlib's ``grace_hopper.jpg``, 512x600, at
  1x, 1.5x and 2x), the worst case for a lossless page.
From each, the pack with the most image tokens. Figures, medians of 5 (3 for the CLI):
- page: its bytes; the write time in-process (render + atomic write, tokenizer and pack already loaded),
  wall and CPU;
- baseline, the bare library on the same pictures: Pillow's PNG encode (same zlib level) + base64 of
  every picture the page holds; ratio = page / baseline;
- the whole command, ``cook inspect DIR --pack N --html FILE`` as a process (CPU = user + sys of the
  child), and marginal: minus the same command on the dataset's smallest pack (start-up, tokenizer load
  and the pack read cancel).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DEMO_TOKENIZER, REPO, WORK, median_cpu, median_wall

COMMAND = ".venv/bin/python -m bench.run_all bench_inspect_html"
SETTINGS = ["media.image.min_patches=1024", "media.image.max_patches=13312", "packing.seq_len=16384"]
DEMO_IMAGES = ["photo-1.jpg", "photo-2.jpg", "portrait.jpg", "wide.jpg", "diagram.png"]
ANSWER = "The picture shows a scene with several shapes and colours, described in some detail. "


def _write_rows(root: Path, rows: list[dict[str, Any]]) -> Path:
    path = root / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _demo_corpus() -> Path:
    root = WORK / "html_demo_raw"
    root.mkdir(parents=True, exist_ok=True)
    for name in DEMO_IMAGES:
        shutil.copy(REPO / "tests" / "assets" / "demo_data" / "media" / name, root / name)
    rows = []
    for i in range(60):
        images = [{"type": "image", "image": DEMO_IMAGES[(i + j) % len(DEMO_IMAGES)]} for j in range(1 + i % 3)]
        parts = [{"type": "text", "text": f"Describe pictures {i}."}, *images]
        answer = ANSWER * (2 + i % 7)
        rows.append({"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": answer}]})
    return _write_rows(root, rows)


def _photo_corpus() -> Path:
    import matplotlib
    from PIL import Image

    root = WORK / "html_photo_raw"
    root.mkdir(parents=True, exist_ok=True)
    with Image.open(os.path.join(matplotlib.get_data_path(), "sample_data", "grace_hopper.jpg")) as photo:
        for scale in (1.0, 1.5, 2.0):
            size = (round(photo.width * scale), round(photo.height * scale))
            photo.convert("RGB").resize(size, Image.Resampling.BICUBIC).save(root / f"photo{scale}.jpg", quality=92)
    rows = []
    for i in range(30):
        parts = [
            {"type": "text", "text": f"Who is this ({i})?"},
            {"type": "image", "image": f"photo{(1.0, 1.5, 2.0)[i % 3]}.jpg"},
        ]
        rows.append({"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": ANSWER * 3}]})
    return _write_rows(root, rows)


def _cook(name: str, records: Path) -> Path:
    from cook.config import load_config
    from cook.runner.local import LocalExecutor
    from cook.runner.pipeline import run_pipeline

    out = WORK / name
    overrides = [
        f"input.path={records}",
        f"input.media_root={records.parent}",
        f"output.dir={out}",
        f"tokenizer.path={DEMO_TOKENIZER}",
        *SETTINGS,
    ]
    run_pipeline(load_config("pipelines/demo.yaml", overrides), LocalExecutor, overwrite=True, progress=False)
    return out


def _packs(root: Path) -> list[tuple[int, Any]]:
    from cook.packfiles import iter_packs
    from cook.validate.members import parse_pack

    found = []
    for index, (_, raw) in enumerate(iter_packs(str(root))):
        pack, _ = parse_pack(raw)
        assert pack is not None
        found.append((index, pack))
    return found


def _image_tokens(pack: Any) -> int:
    from cook.packfiles import visual_embeddings
    from cook.view.media_images import visual_items

    return sum(visual_embeddings(i.kind, i.frames, i.height_px, i.width_px) for i in visual_items(pack))


def _pictures(pack: Any) -> list[np.ndarray]:
    from cook.view import media_images as mi

    return [mi.item_frames(pack, item)[0] for item in mi.visual_items(pack)]


def _baseline(pictures: list[np.ndarray]) -> int:
    from PIL import Image

    from cook.view.media_images import PNG_COMPRESS_LEVEL

    total = 0
    for pixels in pictures:
        import io

        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
        total += len(base64.b64encode(buffer.getvalue()))
    return total


def _cli(root: Path, index: int, out: Path) -> tuple[float, float]:
    """Wall and CPU (user + sys of the child) seconds of one ``cook inspect --html`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = [sys.executable, "-m", "cook.cli.main", "inspect", str(root), "--pack", str(index), "--html", str(out)]
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _median_cli(root: Path, index: int, out: Path) -> tuple[float, float]:
    runs = sorted(_cli(root, index, out) for _ in range(3))
    walls, cpus = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
    return walls[1], cpus[1]


def _measure(label: str, root: Path) -> list[str]:
    """Two rows: the default page budget (3 MB) and none (``--html-max-mb 0``, every picture lossless)."""
    from transformers import AutoTokenizer

    from cook.view.pack_page import DEFAULT_MAX_BYTES, render_pack_page
    from cook.view.tokens import from_tokenizer
    from cook.writer.atomic import atomic_write

    packs = _packs(root)
    index, pack = max(packs, key=lambda ip: (_image_tokens(ip[1]), ip[1].padded_tokens))
    small_index, _ = min(packs, key=lambda ip: ip[1].padded_tokens)
    view = from_tokenizer(AutoTokenizer.from_pretrained(str(DEMO_TOKENIZER)))
    out = WORK / f"{label}.html"
    pictures = _pictures(pack)
    base_wall, base_size = median_wall(lambda: _baseline(pictures), 5)
    base_cpu, _ = median_cpu(lambda: _baseline(pictures), 5)
    cli_wall, cli_cpu = _median_cli(root, index, WORK / f"{label}_cli.html")
    small_wall, small_cpu = _median_cli(root, small_index, WORK / f"{label}_small.html")
    rows = []
    for budget, name in ((DEFAULT_MAX_BYTES, "3 MB (default)"), (None, "none (0)")):

        def write(budget: int | None = budget) -> tuple[int, int]:
            page = render_pack_page(pack, f"pack-{index:09d}", "shard.tar", 16384, view, budget)
            atomic_write(str(out), page)
            return len(page.encode()), page.count('class="media preview"')

        wall, (size, previews) = median_wall(write, 5)
        cpu, _ = median_cpu(write, 5)
        cli = f"{cli_wall:.2f} s / {cli_cpu:.2f} s | {cli_wall - small_wall:.2f} s / {cli_cpu - small_cpu:.2f} s"
        rows.append(
            f"| {label} | {name} | {pack.padded_tokens:,} | {_image_tokens(pack):,} | {len(pictures) - previews} "
            f"of {len(pictures)} | {size / 1e6:.2f} MB | {wall:.3f} s / {cpu:.3f} s | {base_size / 1e6:.2f} MB, "
            f"{base_wall:.3f} s / {base_cpu:.3f} s | {wall / base_wall:.2f}x / {cpu / base_cpu:.2f}x | "
            + (cli if budget else "- | -")
            + " |"
        )
    return rows


def run() -> str:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    rows = [
        *_measure("demo media", _cook("html_demo", _demo_corpus())),
        *_measure("photos", _cook("html_photo", _photo_corpus())),
    ]
    return "\n".join(
        [
            "## cook inspect --html: a 16k-token pack with images",
            "",
            f"`{COMMAND}` (medians of 5 in-process, 3 for the CLI; 1-minute load average {os.getloadavg()[0]:.1f} at the end).",
            "Page = the whole self-contained HTML (images lossless PNG at their stored size, base64). Baseline =",
            "Pillow's PNG encode + base64 of the same pictures, nothing else. Write = render + atomic write with the",
            "pack and tokenizer loaded; CLI = `cook inspect DIR --pack N --html FILE` as a process; marginal = minus",
            "the same command on the dataset's smallest pack. Times are wall / CPU (user + sys).",
            "",
            "| pack | page budget | T | image tokens | pictures exact | page | write | baseline PNG (size, time) "
            "| write / baseline (wall / CPU) | CLI | CLI marginal |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "Every picture is a lossless PNG at its stored size while the page fits its budget (`--html-max-mb`,",
            "default 3); the rest are 320x320-pixel JPEG previews, marked on the page. Lossless, a page costs about",
            "0.4 MB (smooth pictures) to 1.6 MB (a photograph) per 1,000 image tokens, so an image-heavy 16k pack",
            "passes 3 MB only with `--html-max-mb 0` (the `none` rows).",
        ]
    )
