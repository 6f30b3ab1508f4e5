"""Voice notes and audio files to text, through an OpenAI-compatible ``/audio/transcriptions`` endpoint.

One :class:`Transcriber` per gateway holds one ``openai.AsyncOpenAI`` client (OpenAI itself, or a local
faster-whisper or vLLM server through ``base_url``). A transcription that cannot be had (the endpoint
unreachable, an HTTP error, no answer within ``timeout``, an empty transcript) raises
``MediaRejected("transcription_failed", ...)`` with a sentence for the user, and is logged as
``media.transcription_failed`` with the reason; the log never holds the audio nor the key.

``timeout`` bounds the whole transcription. A 5xx answer is tried once more after a short pause, when the
time left allows; a timeout is not (the time allowed is spent, and a slow local server would only be given
the same work twice), nor is anything else (a refused key, an unknown model or an unreachable server do not
mend in a second).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import PurePath

import openai
import structlog

from config.media import TranscriptionConfig, url_host
from gateway.media.errors import MediaRejected

log = structlog.get_logger("gateway.media")

RETRY_PAUSE = 0.5
"""Seconds between a 5xx answer and the one retry."""
NO_KEY = "not-needed"
"""Sent when no key is configured: local servers want the header but take any value."""

ACCEPTED_SUFFIXES = frozenset({".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"})
"""The file name endings OpenAI's endpoint reads the format from (it looks at the name, not the bytes)."""
SUFFIX_FOR_MIME = {
    "audio/ogg": ".ogg", "audio/opus": ".ogg", "application/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp3": ".mp3",
    "audio/mp4": ".m4a", "audio/m4a": ".m4a", "audio/x-m4a": ".m4a", "audio/aac": ".m4a", "video/mp4": ".mp4",
    "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/wave": ".wav", "audio/vnd.wave": ".wav",
    "audio/flac": ".flac", "audio/x-flac": ".flac", "audio/webm": ".webm", "video/webm": ".webm",
}  # fmt: skip
MAX_NAME = 64

_LATER = "please try again later, or type your message"
_TYPE = "please type your message"
FAILURES: dict[str, str] = {
    "timeout": f"the transcription service did not answer in time; {_LATER}",
    "server_error": f"the transcription service had an error; {_LATER}",
    "unreachable": f"the transcription service cannot be reached right now; {_LATER}",
    "rate_limited": f"the transcription service is busy; {_LATER}",
    "key_refused": f"the transcription service refused this bot's key (its operator needs to fix that); {_TYPE}",
    "unknown_model": f"the transcription service does not have the model this bot is set up with; {_TYPE}",
    "refused": f"the transcription service could not read this recording; {_TYPE}",
    "bad_answer": f"the transcription service sent an answer that could not be read; {_LATER}",
    "empty": "no speech could be made out in it",
}
"""Why a transcription failed (the log's ``reason``) -> what the user is told, after the caller names the file."""


class Transcriber:
    """Turns audio bytes into text through the configured endpoint; :meth:`aclose` when done."""

    def __init__(self, config: TranscriptionConfig) -> None:
        self.config = config
        key = config.api_key or os.environ.get("OPENAI_API_KEY") or None
        self._client = openai.AsyncOpenAI(
            api_key=key or NO_KEY, base_url=config.base_url, timeout=config.timeout, max_retries=0
        )
        self.endpoint = url_host(str(self._client.base_url))
        """Where transcriptions go, for logs and operator output: the endpoint's host (and port)."""
        if key is None and config.base_url is None:
            log.warning("media.transcription_no_key", endpoint=self.endpoint,
                        hint="set media.transcription.api_key or OPENAI_API_KEY: OpenAI refuses requests without")  # fmt: skip

    async def transcribe(self, data: bytes, *, mime: str, name: str | None) -> str:
        """The spoken text of ``data`` (audio of type ``mime``; ``name`` as the platform gave it, if at all).

        Raises ``MediaRejected("transcription_failed", ...)``.
        """
        mime = mime.split(";")[0].strip().lower()
        upload = (upload_name(name, mime), data, mime)
        deadline = time.monotonic() + self.config.timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    result = await self._client.audio.transcriptions.create(
                        model=self.config.model,
                        file=upload,
                        language=self.config.language or openai.omit,
                        response_format="json",
                        timeout=max(0.001, deadline - time.monotonic()),
                    )
                break
            except openai.APIStatusError as error:
                if error.status_code >= 500 and attempt == 1 and deadline - time.monotonic() > RETRY_PAUSE:
                    log.info("media.transcription_retry", status=error.status_code, model=self.config.model,
                             endpoint=self.endpoint)  # fmt: skip
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                raise self._failed(status_reason(error.status_code), data, mime, attempt,
                                   status=error.status_code, detail=status_detail(error)) from error  # fmt: skip
            except (TimeoutError, openai.APITimeoutError) as error:
                waited = f"no answer within {self.config.timeout:g} s"
                raise self._failed("timeout", data, mime, attempt, detail=waited) from error
            except openai.APIConnectionError as error:
                raise self._failed("unreachable", data, mime, attempt, detail=connection_detail(error)) from error
            except openai.APIError as error:  # an answer that is not what the API promises
                raise self._failed("bad_answer", data, mime, attempt, detail=error.message) from error
        text = (result if isinstance(result, str) else getattr(result, "text", None) or "").strip()
        if not text:
            raise self._failed("empty", data, mime, attempt, detail="the endpoint answered with no text")
        log.info("media.transcribed", model=self.config.model, endpoint=self.endpoint, bytes=len(data), mime=mime,
                 chars=len(text), attempts=attempt)  # fmt: skip
        return text

    def _failed(
        self, reason: str, data: bytes, mime: str, attempts: int, *, status: int | None = None, detail: str = ""
    ) -> MediaRejected:
        log.warning("media.transcription_failed", reason=reason, status=status, detail=detail[:200],
                    model=self.config.model, endpoint=self.endpoint, bytes=len(data), mime=mime,
                    attempts=attempts)  # fmt: skip
        return MediaRejected("transcription_failed", FAILURES[reason])

    async def listed_models(self, *, timeout: float) -> list[str]:
        """The model ids the endpoint lists (``GET /models``): a read-only call that shows it is reachable and takes
        the key, for health checks. Raises the SDK's errors as they are."""
        page = await self._client.models.list(timeout=timeout)
        return [model.id for model in page.data]

    async def aclose(self) -> None:
        await self._client.close()


def status_reason(status: int) -> str:
    """The log's reason for an HTTP error status."""
    if status >= 500:
        return "server_error"
    return {401: "key_refused", 403: "key_refused", 404: "unknown_model", 429: "rate_limited"}.get(status, "refused")


def status_detail(error: openai.APIStatusError) -> str:
    """The endpoint's own words for an error answer (OpenAI's ``error.message``), else the SDK's summary."""
    body = error.body
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) and message else error.message


def connection_detail(error: openai.APIConnectionError) -> str:
    """What went wrong underneath the SDK's "Connection error." (refused, reset, name not found)."""
    cause = error.__cause__
    return f"{error.message} ({type(cause).__name__}: {cause})"[:200] if cause else error.message


def upload_name(name: str | None, mime: str) -> str:
    """The file name sent with the audio: the platform's (its last part, shortened), ending the way the endpoint
    recognises the format by (OpenAI reads the format from the name; a Telegram voice note has no name at all)."""
    base = PurePath((name or "").replace("\\", "/")).name.strip() or "voice"
    path = PurePath(base)
    if path.suffix.lower() in ACCEPTED_SUFFIXES:
        stem, suffix = path.stem, path.suffix
    else:
        stem, suffix = base if not path.suffix else path.stem, SUFFIX_FOR_MIME.get(mime, path.suffix)
    return stem[: MAX_NAME - len(suffix)] + suffix

