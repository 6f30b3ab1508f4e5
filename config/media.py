"""The ``media:`` section: photos, documents and voice notes users send (limits, keeping, transcription)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from config.fields import PositiveFloat, PositiveInt, Secret, Section, at_least, between


class MediaLimits(Section):
    image_mb: Annotated[float, between(0.01, 100.0)] = 10.0
    """The largest photo or image file taken, in megabytes (larger ones are refused with a reply saying so)."""
    document_mb: Annotated[float, between(0.01, 100.0)] = 20.0
    """The largest PDF or text document taken, in megabytes."""
    audio_mb: Annotated[float, between(0.01, 100.0)] = 20.0
    """The largest voice note or audio file taken, in megabytes."""
    audio_minutes: Annotated[float, between(0.1, 240.0)] = 10.0
    """The longest voice note or audio file transcribed, in minutes (measured from the file itself)."""
    pdf_pages: Annotated[int, between(1, 2000)] = 100
    """The most pages a PDF may have (Anthropic reads at most 100 per request)."""
    image_megapixels: Annotated[float, between(1.0, 500.0)] = 50.0
    """The largest picture decoded, in millions of pixels: a small file claiming more (a "PNG bomb") is refused
    before it is decoded."""
    text_chars: Annotated[int, between(1000, 5_000_000)] = 200_000
    """A text document longer than this many characters is cut there, with a note to the model."""


class TranscriptionConfig(Section):
    provider: Literal["openai"] = "openai"
    """The API voice notes are transcribed through: ``openai`` is any OpenAI-compatible ``/audio/transcriptions``
    endpoint (OpenAI itself, a faster-whisper server, vLLM)."""
    model: str = "whisper-1"
    """The transcription model's name (``whisper-1``, ``gpt-4o-mini-transcribe``, a local server's model)."""
    base_url: str | None = None
    """The endpoint (``http://127.0.0.1:8000/v1`` for a local server); unset means OpenAI's."""
    api_key: Secret = None
    """Its key; unset means OPENAI_API_KEY (a local server takes any)."""
    language: str | None = None
    """The spoken language as an ISO-639-1 code (``en``, ``de``) when it is always the same; unset: detected."""
    timeout: PositiveFloat = 120.0
    """Seconds one transcription may take."""

    @property
    def endpoint(self) -> str:
        """Where transcriptions go, by host (and port): ``api.openai.com`` when ``base_url`` is unset."""
        return url_host(self.base_url or "https://api.openai.com/v1")


def url_host(url: str) -> str:
    """``host`` or ``host:port`` of a URL, as logs and operator output name an endpoint: never its path, nor any
    credentials written into it."""
    parts = urlsplit(url)
    host = parts.hostname or url
    host = f"[{host}]" if ":" in host and parts.hostname else host
    return f"{host}:{parts.port}" if parts.port else host


class MediaConfig(Section):
    enabled: bool = True
    """Read photos, documents and voice notes users send; off: they get a one-line reply that files are not read here."""
    limits: MediaLimits = MediaLimits()
    """Sizes and lengths taken; anything larger is refused with a reply that says the limit."""
    download_timeout: PositiveFloat = 60.0
    """Seconds one file's download may take in all."""
    retention_days: Annotated[float, at_least(0.0)] = 30.0
    """Days the files are kept in the home's media folder; older turns then show a short stand-in. 0 keeps them."""
    album_wait_ms: Annotated[int, between(0, 10_000)] = 1500
    """How long the gateway waits for the rest of an album (several photos sent together) so it becomes one turn."""
    transcription: TranscriptionConfig | None = None
    """Where voice notes are transcribed; unset: users are told voice notes are not supported here."""
    max_parallel: PositiveInt = 4
    """Files downloaded and prepared at once, across all chats (bounds memory when many arrive together)."""
