"""Stored frames (``frame.<k>.png|jpg``, ``media.image/video.storage`` png | jpeg) -> the patches they hold.

    pack members + media_sizes -frame_patches-> uint8 [P, 768] (or None and findings)

Every frame member is checked from its header alone (``cook.frames.frame_header``: Pillow reads it
lazily): numbered 0 .. n-1, not beside ``pixel_patches.npy``, one per frame that
``media_sizes`` lists, an RGB image of its name's codec (``frame_codec``), exactly its row's width
and height (``frame_size``). Without ``decode`` the patches are a zero view of the right row count
(``media.check_visual`` counts rows, never reads values); with ``decode`` (``--deep``, ``cook inspect``)
every frame is decoded as the reader decodes it, and a frame that fails is ``frame_member``.
``storage_findings``: a pack stores its patches as the manifest says, each frame in its medium's codec
(``media.image.storage`` for images and tiles, ``media.video.storage`` for video frames; ``frame_codec``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cook import format as fmt
from cook.contract import FrameStorage
from cook.frames import FRAME_ERRORS, decode_frame, frame_header, frame_sizes, frame_storages
from cook.packfiles import MemberData
from cook.validate.problems import Code, Finding


def frame_patches(
    members: Mapping[str, MemberData], sizes: np.ndarray, decode: bool, findings: list[Finding]
) -> np.ndarray | None:
    """uint8 [P, 768] held by the frame members (rules in the module docstring); None, with findings, when
    they do not match ``sizes`` (int32 [M, 3])."""
    found = fmt.frame_names(members)
    expected = frame_sizes(sizes)
    problem = _layout_problem(members, found, len(expected))
    if problem is not None:
        findings.append((Code.FRAME_MEMBER, problem))
        return None
    before = len(findings)
    for (_, name, codec), (height_px, width_px) in zip(found, expected, strict=True):
        findings += _header_findings(name, codec, members[name], height_px, width_px)
    if len(findings) > before:
        return None
    if not decode:
        rows = sum(fmt.frame_patches(h, w) for h, w in expected)
        return np.broadcast_to(np.zeros((1, fmt.PATCH_VALUES), np.uint8), (rows, fmt.PATCH_VALUES))
    decoded = []
    for (_, name, codec), (height_px, width_px) in zip(found, expected, strict=True):
        try:
            decoded.append(decode_frame(members[name], codec, height_px, width_px))
        except FRAME_ERRORS as err:
            findings.append((Code.FRAME_MEMBER, f"{name} does not decode: {err}"))
    return np.concatenate(decoded) if len(findings) == before else None


def _layout_problem(members: Mapping[str, MemberData], found: list[tuple[int, str, str]], frames: int) -> str | None:
    names = [name for _, name, _ in found]
    if fmt.PIXEL_PATCHES in members:
        return f"frame members {names[:3]} beside {fmt.PIXEL_PATCHES}"
    if [index for index, _, _ in found] != list(range(len(found))):
        return f"frame members {names} are not numbered 0 .. {len(found) - 1}"
    if len(found) != frames:
        return f"{len(found)} frame members, {fmt.MEDIA_SIZES} lists {frames} frames"
    return None


def _header_findings(name: str, codec: str, data: MemberData, height_px: int, width_px: int) -> list[Finding]:
    try:
        actual, mode, width, height = frame_header(data)
    except FRAME_ERRORS as err:
        return [(Code.FRAME_MEMBER, f"{name} is not a readable image: {err}")]
    if actual != codec or mode != "RGB":
        return [(Code.FRAME_CODEC, f"{name} is a {actual or 'non-frame'} {mode} image, expected RGB {codec}")]
    if (width, height) != (width_px, height_px):
        return [(Code.FRAME_SIZE, f"{name} is {width}x{height}, {fmt.MEDIA_SIZES} says {width_px}x{height_px}")]
    return []


def storage_findings(
    members: Mapping[str, MemberData],
    image: str | None,
    video: str | None = None,
    sizes: np.ndarray | None = None,
    kinds: Sequence[str] | None = None,
) -> list[Finding]:
    """The pack's visual storage against the manifest's ``media.image.storage`` (``image``; None: not
    recorded) and ``media.video.storage`` (``video``; None: as ``image``). With the pack's ``media_sizes``
    and media ``kinds`` (meta.json, placeholder order) each frame's codec is checked against its medium's;
    without them, the set of codecs."""
    if image is None or members.keys() <= fmt.TEXT_PACK_MEMBERS:  # a text pack: no visual storage to check
        return []
    found = fmt.frame_names(members)
    if not found and fmt.PIXEL_PATCHES not in members:
        return []
    video = image if video is None else video
    stored = sorted({codec for _, _, codec in found}) or ["raw"]
    if not set(stored) <= {image, video}:
        wanted = f"media.image.storage {image}" + (f", media.video.storage {video}" if video != image else "")
        return [(Code.FRAME_CODEC, f"visual frames stored as {', '.join(stored)}, the manifest says {wanted}")]
    if image == video or sizes is None or kinds is None or not found:
        return []
    try:
        expected = frame_storages(sizes, kinds, FrameStorage(image), FrameStorage(video))
    except ValueError:  # kinds and media_sizes rows disagree: media.check_visual reports it
        return []
    for (_, name, codec), storage in zip(found, expected, strict=False):
        if codec != storage.codec:
            medium = "media.video.storage" if storage.codec == video else "media.image.storage"
            return [(Code.FRAME_CODEC, f"{name} is {codec}, the manifest's {medium} is {storage.codec}")]
    return []
