"""The fake model server's speech-to-text endpoint: OpenAI's ``POST /v1/audio/transcriptions``.

It takes the multipart form the real API takes (``file``, ``model``, optional ``language`` and
``response_format``), checks a Bearer key is presented, and answers ``{"text": ...}`` (or the bare text
for ``response_format=text``). A test scripts what comes back with :meth:`TranscriptionEndpoint.script`:
a transcript (a ``str``), a :class:`SpeechFailure` (an HTTP error in OpenAI's error shape) or a
:class:`SpeechHang` (the request held open until the client gives up). With nothing scripted the answer
is ``default_text``. Every request is kept in ``requests`` as a :class:`SpeechRequest` (the form's fields,
the file's name, content type and size, never its bytes). ``GET /v1/models`` lists ``models``, the
read-only call a health check may make.

The server mounts it with :meth:`TranscriptionEndpoint.add_routes` and resets it with its own reset.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import TypeAlias

from aiohttp import web

from .replies import MAX_STALL_SECONDS
from .wire import json_response

PATH = "/v1/audio/transcriptions"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class SpeechFailure:
    """Answer with HTTP ``status`` and OpenAI's error body (``message`` or a default wording)."""

    status: int = 500
    message: str | None = None


@dataclass(frozen=True)
class SpeechHang:
    """Hold the request open for ``seconds`` (at most ``MAX_STALL_SECONDS``) or until the client goes away
    or the endpoint is reset; a client still waiting then gets the next answer as usual."""

    seconds: float = MAX_STALL_SECONDS


SpeechReply: TypeAlias = str | SpeechFailure | SpeechHang


@dataclass
class SpeechRequest:
    """What one transcription request carried, and how it was answered (``status`` None: the client
    gave up while it was held)."""

    model: str | None
    language: str | None
    response_format: str | None
    filename: str | None
    content_type: str | None
    size: int
    authorization: str | None
    reply: SpeechReply | None = None
    status: int | None = None
    fields: dict[str, str] = field(default_factory=dict)


_WORDING = {
    400: ("invalid_request_error", "Audio file might be corrupted or unsupported"),
    401: ("invalid_request_error", "Incorrect API key provided."),
    404: ("invalid_request_error", "The model does not exist or you do not have access to it."),
    429: ("requests", "Rate limit reached for requests. Please try again later."),
}
_SERVER_WORDING = ("server_error", "The server had an error while processing your request.")


class TranscriptionEndpoint:
    """Scripted answers to ``POST /v1/audio/transcriptions`` and a record of every request.

    Settings (cleared by :meth:`reset`): ``default_text``, the transcript when nothing is scripted;
    ``api_key``, the only key taken when set (any non-empty key otherwise); ``models``, the ids
    ``GET /v1/models`` lists.
    """

    def __init__(self) -> None:
        self.requests: list[SpeechRequest] = []
        self.model_list_calls = 0
        self._queue: deque[SpeechReply] = deque()
        self._release = asyncio.Event()
        self.reset()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(PATH, self._transcribe)
        router.add_get(MODELS_PATH, self._models)

    def reset(self) -> None:
        """Forget requests and scripts, release held requests, restore the settings."""
        self._release.set()
        self._release = asyncio.Event()
        self._queue.clear()
        self.requests.clear()
        self.model_list_calls = 0
        self.default_text = "a transcript from the fake endpoint"
        self.api_key: str | None = None
        self.models: list[str] = ["whisper-1", "gpt-4o-mini-transcribe"]

    def script(self, *replies: SpeechReply) -> None:
        """Queue answers; each transcription request takes the next one."""
        self._queue.extend(replies)

    @property
    def last(self) -> SpeechRequest:
        if not self.requests:
            raise AssertionError("the transcription endpoint has received no requests")
        return self.requests[-1]

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        record = await _read_form(request)
        self.requests.append(record)
        refused = self._refusal(request) or _missing_field(record)
        if refused is not None:
            return _answer(record, refused, "")
        reply = self._queue.popleft() if self._queue else self.default_text
        record.reply = reply
        if isinstance(reply, SpeechHang):
            release = self._release
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), timeout=min(reply.seconds, MAX_STALL_SECONDS))
            reply = self._queue.popleft() if self._queue else self.default_text
        return _answer(record, reply, record.response_format or "json")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.model_list_calls += 1
        refused = self._refusal(request)
        if refused is not None:
            return _error(refused)
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in self.models]
        return json_response({"object": "list", "data": data})

    def _refusal(self, request: web.Request) -> SpeechFailure | None:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip() or (self.api_key is not None and key.strip() != self.api_key):
            return SpeechFailure(401)
        return None


async def _read_form(request: web.Request) -> SpeechRequest:
    fields: dict[str, str] = {}
    filename = content_type = None
    size = 0
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        for name, value in form.items():
            if isinstance(value, web.FileField):
                if name == "file":
                    filename, content_type, size = value.filename, value.content_type, len(value.file.read())
            else:
                fields[name] = str(value)
    return SpeechRequest(
        model=fields.get("model"),
        language=fields.get("language"),
        response_format=fields.get("response_format"),
        filename=filename,
        content_type=content_type,
        size=size,
        authorization=request.headers.get("Authorization"),
        fields=fields,
    )


def _missing_field(record: SpeechRequest) -> SpeechFailure | None:
    if record.filename is None:
        return SpeechFailure(400, "Missing required parameter: 'file'.")
    if not record.model:
        return SpeechFailure(400, "Missing required parameter: 'model'.")
    if record.response_format not in (None, "json", "text", "verbose_json"):
        return SpeechFailure(400, f"Unsupported response_format: {record.response_format!r}.")
    return None


def _answer(record: SpeechRequest, reply: SpeechReply, response_format: str) -> web.StreamResponse:
    if isinstance(reply, SpeechFailure):
        record.status = reply.status
        return _error(reply)
    assert isinstance(reply, str)
    record.status = 200
    if response_format == "text":
        return web.Response(text=reply, content_type="text/plain")
    body: dict[str, object] = {"text": reply}
    if response_format == "verbose_json":
        body |= {"task": "transcribe", "language": record.language or "english", "duration": 0.0, "segments": []}
    return json_response(body)


def _error(failure: SpeechFailure) -> web.Response:
    kind, wording = _WORDING.get(failure.status, _SERVER_WORDING if failure.status >= 500 else _WORDING[400])
    body = {"error": {"message": failure.message or wording, "type": kind, "param": None, "code": None}}
    return json_response(body, status=failure.status)
