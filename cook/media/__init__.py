"""Media: resolved bytes -> pre-patchified ``MediaItem``s with their placeholder blocks (SPEC §6).

    process_media(MediaRef, bytes, MediaConfig) -> tuple[MediaItem, ...]

One item per reference, except a video with ``media.video.use_audio`` and an audio track, which gives
two: the frames item, then the audio item (in that placeholder order). Pure functions of their
inputs; every failure is a ``Rejected``:

- ``media_limit``: more than ``media.max_media_bytes``, too many pixels, too long (checked from headers,
  before decoding);
- ``media_decode``: corrupt, truncated, empty or implausible data;
- ``media_unsupported``: an unknown kind, or a recognized format we do not decode.

Modules: image.py (dynamic resolution), tiles.py (512 px tiles), video.py, audio.py (+ mel.py, the
Parakeet front end in NumPy), limits.py (pre-decode checks). Nothing here imports torch; PyAV is
imported only by the functions that need it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from cook.config import MediaConfig
from cook.errors import Rejected, RejectReason
from cook.media.audio import process_audio
from cook.media.image import process_image
from cook.media.tiles import process_tiles
from cook.media.video import process_video
from cook.types import MediaItem, MediaRef

Processor = Callable[[MediaRef, bytes, MediaConfig], tuple[MediaItem, ...]]

IMAGE_MODES: Final[dict[str, Processor]] = {"dynamic": process_image, "tiles": process_tiles}


def _image(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    return IMAGE_MODES[config.image.mode](ref, data, config)


PROCESSORS: Final[dict[str, Processor]] = {"image": _image, "video": process_video, "audio": process_audio}


def process_media(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Decode, check and patchify one resolved media reference.

    >>> from cook.config import MediaConfig
    >>> item, = process_media(MediaRef("image", "cat.png"), png_bytes_640x480, MediaConfig())  # doctest: +SKIP
    >>> item.size, item.n_patches, item.n_embeddings  # doctest: +SKIP
    ((1, 480, 640), 1200, 300)
    """
    name = ref.ref if len(ref.ref) <= 120 else ref.ref[:117] + "..."
    if len(data) > config.max_media_bytes:
        raise Rejected(
            RejectReason.MEDIA_LIMIT,
            f"{ref.kind} {name!r}: {len(data)} bytes > media.max_media_bytes={config.max_media_bytes}",
        )
    processor = PROCESSORS.get(ref.kind)
    if processor is None:
        raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"{name!r}: unknown media kind {ref.kind!r}")
    try:
        return processor(ref, data, config)
    except Rejected as rejected:  # name the reference in every detail
        raise Rejected(rejected.reason, f"{ref.kind} {name!r}: {rejected.detail}") from None


__all__ = ["PROCESSORS", "Processor", "process_media"]
