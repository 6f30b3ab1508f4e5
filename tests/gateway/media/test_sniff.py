"""What a file is, told from its bytes: every format the gateway reads, the video it names, and what it refuses."""

from __future__ import annotations

import codecs

import pytest

from gateway.media.sniff import Sniffed, sniff
from tests.fakes import media_files as files


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (files.jpeg(40, 30), Sniffed("image", "image/jpeg")),
        (files.png(40, 30), Sniffed("image", "image/png")),
        (files.encoded(40, 30, "GIF"), Sniffed("image", "image/gif")),
        (files.encoded(40, 30, "WEBP"), Sniffed("image", "image/webp")),
        (files.encoded(40, 30, "BMP"), Sniffed("image", "image/bmp")),
        (files.pdf(2), Sniffed("pdf", "application/pdf")),
        (b"\r\n" + files.pdf(1), Sniffed("pdf", "application/pdf")),
        (files.encrypted_pdf(), Sniffed("pdf", "application/pdf")),
        (files.ogg_opus(3), Sniffed("audio", "audio/ogg")),
        (files.ogg_vorbis_head(), Sniffed("audio", "audio/ogg")),
        (files.mp3(1), Sniffed("audio", "audio/mpeg")),
        (files.mp3(1, id3=True), Sniffed("audio", "audio/mpeg")),
        (files.m4a_head(), Sniffed("audio", "audio/mp4")),
        (files.m4a_head(b"mp42", b"isom", b"M4A "), Sniffed("audio", "audio/mp4")),
        (files.wav(0.5), Sniffed("audio", "audio/wav")),
        (files.flac_head(), Sniffed("audio", "audio/flac")),
        (files.webm_head("A_OPUS"), Sniffed("audio", "audio/webm")),
        (files.amr_head(), Sniffed("audio", "audio/amr")),
        (files.amr_head(wide=True), Sniffed("audio", "audio/amr-wb")),
        (files.m4a_head(b"isom", b"isom", b"avc1", b"mp41"), Sniffed("video", "video/mp4")),
        (files.m4a_head(b"qt  ", b"qt  "), Sniffed("video", "video/quicktime")),
        (files.webm_head("V_VP9", "A_OPUS"), Sniffed("video", "video/webm")),
        (files.ogg_theora_head(), Sniffed("video", "video/ogg")),
    ],
    ids=lambda value: value.mime if isinstance(value, Sniffed) else "",
)
def test_formats_are_told_by_their_magic_numbers(data: bytes, expected: Sniffed) -> None:
    assert sniff(data) == expected


@pytest.mark.parametrize(
    "text",
    [
        "plain ASCII\n".encode(),
        "Grüße, 你好, emoji 🙂\r\nand a tab\there".encode(),
        codecs.BOM_UTF8 + "with a byte order mark".encode(),
        "UTF-16 with its BOM: ünïcödé".encode("utf-16"),
        "UTF-16 big-endian".encode("utf-16-be").join([codecs.BOM_UTF16_BE, b""]),
        "\x1b[31mred\x1b[0m in a coloured log, and a form feed \f".encode(),
        ("a stray bell \x07 in a long line " + "x" * 200).encode(),
    ],
)
def test_text_is_utf8_or_utf16_with_its_bom(text: bytes) -> None:
    assert sniff(text) == Sniffed("text", "text/plain")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        "Latin-1, not UTF-8: caf\xe9".encode("latin-1"),
        b"text with a NUL\x00 in it",
        "UTF-16 without its BOM".encode("utf-16-le"),
        bytes(range(1, 32)) * 4,  # control characters: binary, not text
        b"\x00\x01\x02\x03 some binary format",
        b"PK\x03\x04" + bytes(40),  # a ZIP (an Office document, an archive)
        files.m4a_head(b"heic", b"mif1", b"heic"),  # a HEIC picture: same container as MP4, not read here
    ],
)
def test_anything_else_is_not_read(data: bytes) -> None:
    assert sniff(data) is None


def test_the_name_and_the_claim_play_no_part() -> None:
    # sniff takes the bytes alone: a PDF is a PDF, whatever it was called, and text is text even if it starts "%PDF".
    assert sniff(files.pdf(1)).kind == "pdf"  # type: ignore[union-attr]
    assert sniff(b"%PDF is how a PDF begins; this note is text").kind == "text"  # type: ignore[union-attr]
