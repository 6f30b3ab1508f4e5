"""PDFs and text files read: pages counted before any text is extracted, encryption and damage refused, text bounded."""

from __future__ import annotations

import codecs

import pytest

from gateway.media.documents import read_pdf, read_text
from gateway.media.errors import MediaRejected
from tests.fakes import media_files as files


def test_a_pdf_gives_its_pages_and_their_text() -> None:
    read = read_pdf(files.pdf(3, "Invoice line"), max_pages=100, max_chars=10_000)

    assert read.pages == 3
    assert not read.cut
    assert read.text == "\n\n".join(f"--- page {n} ---\nInvoice line {n}" for n in (1, 2, 3))


def test_the_text_stops_at_the_character_limit() -> None:
    read = read_pdf(files.pdf(50, "A line of the report"), max_pages=100, max_chars=200)

    assert read.pages == 50
    assert read.cut
    assert len(read.text) == 200
    assert read.text.startswith("--- page 1 ---\nA line of the report 1")


def test_a_pdf_of_2000_pages_is_refused_before_any_text_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from pypdf import PageObject

    def extract_text(*args: object, **kwargs: object) -> str:
        raise AssertionError("text extracted from a PDF that is refused for its length")

    monkeypatch.setattr(PageObject, "extract_text", extract_text)  # the library's, not ours: a tripwire
    with pytest.raises(MediaRejected) as refused:
        read_pdf(files.pdf(2000), max_pages=100, max_chars=10_000)

    assert refused.value.reason == "too_many_pages"
    assert refused.value.user_text == "it has 2,000 pages and the limit is 100"


def test_an_encrypted_pdf_is_refused_with_what_to_do() -> None:
    with pytest.raises(MediaRejected) as refused:
        read_pdf(files.encrypted_pdf(), max_pages=100, max_chars=10_000)

    assert refused.value.reason == "encrypted"
    assert "without the protection" in refused.value.user_text


@pytest.mark.parametrize(
    "data",
    [
        files.truncated(files.pdf(3), 0.3),
        b"%PDF-1.4\n" + bytes(500),
        b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF",  # no pages
    ],
)
def test_a_damaged_pdf_is_refused_as_corrupt(data: bytes) -> None:
    with pytest.raises(MediaRejected) as refused:
        read_pdf(data, max_pages=100, max_chars=10_000)

    assert refused.value.reason == "corrupt"


def test_a_scanned_pdf_without_text_is_read_with_empty_text() -> None:
    read = read_pdf(files.pdf(2, None), max_pages=100, max_chars=10_000)

    assert (read.pages, read.text, read.cut) == (2, "", False)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("Grüße\r\nzweite Zeile\rdritte".encode(), "Grüße\nzweite Zeile\ndritte"),
        (codecs.BOM_UTF8 + b"with BOM", "with BOM"),
        ("UTF-16 text".encode("utf-16"), "UTF-16 text"),
    ],
)
def test_text_files_are_decoded_with_newlines_as_lf(data: bytes, text: str) -> None:
    assert read_text(data, max_chars=1000) == (text, False)


def test_a_long_text_file_is_cut() -> None:
    assert read_text(b"x" * 5000, max_chars=1000) == ("x" * 1000, True)
