"""What a file is, from its own bytes: the magic numbers at its start, never its name or the platform's claim.

:func:`sniff` answers with a :class:`Sniffed` kind and MIME type, or None for anything this gateway
does not read. Kinds: ``image`` (JPEG, PNG, GIF, WebP, BMP), ``pdf``, ``text`` (UTF-8, or UTF-16 with
its byte order mark, without NULs or control-character junk), ``audio`` (Ogg Opus/Vorbis/FLAC, MP3,
M4A, WAV, FLAC, audio-only WebM, AMR) and ``video`` (MP4/MOV, video WebM/Matroska, Ogg Theora),
which is recognised so that the user can be told it is not read, rather than "unknown type".
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Final, Literal

SniffedKind = Literal["image", "pdf", "text", "audio", "video"]


@dataclass(frozen=True, slots=True)
class Sniffed:
    kind: SniffedKind
    mime: str


_PREFIXES: Final = (
    (b"\xff\xd8\xff", Sniffed("image", "image/jpeg")),
    (b"\x89PNG\r\n\x1a\n", Sniffed("image", "image/png")),
    (b"GIF87a", Sniffed("image", "image/gif")),
    (b"GIF89a", Sniffed("image", "image/gif")),
    (b"fLaC", Sniffed("audio", "audio/flac")),
    (b"#!AMR\n", Sniffed("audio", "audio/amr")),
    (b"#!AMR-WB\n", Sniffed("audio", "audio/amr-wb")),
)
_PDF_MARK: Final = re.compile(rb"%PDF-[12]\.[0-9]")
_PDF_WINDOW: Final = 1024
"""Readers accept ``%PDF-1.x`` anywhere in the first kilobyte (some generators write junk before it)."""

_OGG_CODECS: Final = (
    (b"OpusHead", Sniffed("audio", "audio/ogg")),
    (b"\x01vorbis", Sniffed("audio", "audio/ogg")),
    (b"\x7fFLAC", Sniffed("audio", "audio/ogg")),
    (b"Speex   ", Sniffed("audio", "audio/ogg")),
    (b"\x80theora", Sniffed("video", "video/ogg")),
)

_MP4_AUDIO_BRANDS: Final = frozenset({b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "})
_MP4_VIDEO_BRANDS: Final = frozenset({
    b"isom", b"iso2", b"iso4", b"iso5", b"iso6", b"mp41", b"mp42", b"avc1", b"M4V ", b"M4VH", b"M4VP", b"qt  ",
    b"3gp4", b"3gp5", b"3gp6", b"3g2a", b"dash", b"mmp4", b"MSNV", b"f4v ",
})  # fmt: skip
"""ISO media brands of video files (HEIC/AVIF pictures share the container and are not among them)."""

_EBML: Final = b"\x1a\x45\xdf\xa3"
_MATROSKA_HEAD: Final = 64 * 1024
"""The track list (with each track's codec id) comes before the first cluster of media data."""
_MATROSKA_VIDEO_CODEC: Final = re.compile(rb"\x86[\x81-\x9f]V_")
_MATROSKA_AUDIO_CODEC: Final = re.compile(rb"\x86[\x81-\x9f]A_")
"""A CodecID element (id 0x86, a one-byte size, then ``V_VP9``, ``A_OPUS`` ...)."""

_BMP_HEADER_SIZES: Final = frozenset({12, 40, 52, 56, 64, 108, 124})

_TEXT_CONTROLS: Final = bytes(set(range(32)) - {9, 10, 11, 12, 13, 27}) + b"\x7f"
"""Control characters that do not belong in text (tab, newlines, form feed and ESC of coloured logs do)."""
_CONTROL_SHARE: Final = 0.01
"""A stray control character is tolerated; more than this share of them is not text."""


def sniff(data: bytes) -> Sniffed | None:
    """What ``data`` is, or None when it is nothing this gateway reads (see the module's docstring)."""
    for prefix, found in _PREFIXES:
        if data.startswith(prefix):
            return found
    head = data[:16]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Sniffed("image", "image/webp")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return Sniffed("audio", "audio/wav")
    if head[:2] == b"BM" and len(data) >= 18 and int.from_bytes(data[14:18], "little") in _BMP_HEADER_SIZES:
        return Sniffed("image", "image/bmp")
    if _PDF_MARK.search(data, 0, _PDF_WINDOW):
        return Sniffed("pdf", "application/pdf")
    if head[:4] == b"OggS":
        return _ogg(data)
    if head[4:8] == b"ftyp":
        return _iso_media(data)
    if head[:4] == _EBML:
        return _matroska(data)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _text(data)  # before MPEG audio: FF FE also reads as a frame header
    if head[:3] == b"ID3":
        return _after_id3(data)
    if _mpeg_audio_frame(head):
        return Sniffed("audio", "audio/mpeg")
    return _text(data)


def _ogg(data: bytes) -> Sniffed | None:
    """The codec of an Ogg stream, from the first packet of its first page."""
    if len(data) < 27:
        return None
    packet = data[27 + data[26] :]
    for magic, found in _OGG_CODECS:
        if packet.startswith(magic):
            return found
    return None


def _iso_media(data: bytes) -> Sniffed | None:
    """MP4, M4A, MOV or 3GP by the brands of the ``ftyp`` box: audio when a brand says so, else video."""
    size = int.from_bytes(data[:4], "big")
    box = data[8 : min(max(size, 16), 256)]  # the major brand, the minor version, then compatible brands
    brands = {box[:4]} | {box[i : i + 4] for i in range(8, len(box) - 3, 4)}
    if brands & _MP4_AUDIO_BRANDS:
        return Sniffed("audio", "audio/mp4")
    if brands & _MP4_VIDEO_BRANDS:
        return Sniffed("video", "video/quicktime" if b"qt  " in brands else "video/mp4")
    return None


def _matroska(data: bytes) -> Sniffed | None:
    """WebM or Matroska: audio when its tracks name audio codecs only, else video."""
    head = data[:_MATROSKA_HEAD]
    webm = b"webm" in head[:64]
    if _MATROSKA_VIDEO_CODEC.search(head) or not _MATROSKA_AUDIO_CODEC.search(head):
        return Sniffed("video", "video/webm" if webm else "video/x-matroska")
    return Sniffed("audio", "audio/webm" if webm else "audio/x-matroska")


def _after_id3(data: bytes) -> Sniffed | None:
    """An ID3v2 tag leads MP3 files, and sometimes FLAC: what follows the tag decides."""
    if len(data) < 10:
        return None
    size = 10 + ((data[6] & 0x7F) << 21 | (data[7] & 0x7F) << 14 | (data[8] & 0x7F) << 7 | (data[9] & 0x7F))
    if data[5] & 0x10:
        size += 10  # a footer follows the tag
    if data[size : size + 4] == b"fLaC":
        return Sniffed("audio", "audio/flac")
    return Sniffed("audio", "audio/mpeg")


def _mpeg_audio_frame(head: bytes) -> bool:
    """An MPEG audio frame header (MP3 without a tag): sync bits, a layer, a bitrate and a sample rate that exist."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version, layer = (head[1] >> 3) & 0b11, (head[1] >> 1) & 0b11
    bitrate, rate = head[2] >> 4, (head[2] >> 2) & 0b11
    return version != 0b01 and layer != 0 and bitrate not in (0, 0xF) and rate != 0b11


def _text(data: bytes) -> Sniffed | None:
    """Plain text: UTF-8 (a BOM allowed), or UTF-16 with its BOM; no NULs, hardly any control characters."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
        raw = text.encode("utf-8")
    else:
        raw = data
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not raw or b"\x00" in raw:
        return None
    # In UTF-8 a byte below 0x80 is always that character, so counting bytes counts characters.
    controls = len(raw) - len(raw.translate(None, _TEXT_CONTROLS))
    if controls > _CONTROL_SHARE * len(raw):
        return None
    return Sniffed("text", "text/plain")
