"""How long a voice note or audio file is, read from its own bytes (mutagen), not from the platform's claim.

A platform's ``duration`` is what the sender's client said; the file is what would be transcribed.
:func:`audio_duration` reads the stream's headers (Ogg's last granule position, MP3's frame count or
bitrate, MP4's track header, WAV's and FLAC's sample counts) and answers None for what mutagen cannot
read: WebM and AMR, a damaged file, or anything that is not audio.
"""

from __future__ import annotations

import io
import math

import mutagen


def audio_duration(data: bytes) -> float | None:
    """Seconds of audio in ``data``, or None when it cannot be told from the bytes. Synchronous (a thread's work)."""
    try:
        found = mutagen.File(io.BytesIO(data))
        length = found.info.length if found is not None else None
    except Exception:  # noqa: BLE001 - any failure to parse untrusted bytes means the length is unknown
        return None
    if not isinstance(length, int | float) or not math.isfinite(length) or length <= 0:
        return None
    return float(length)
