"""The aiohttp fake model server: routing, reply selection, errors and recording."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from .anthropic_api import AnthropicDialect
from .cache import AnthropicCache, CacheFigures, FakeClock, OpenAICache, PrefixStore
from .openai_api import OpenAIDialect
from .prompt import PromptBlock
from .records import Api, RequestRecord
from .replies import (
    AuthFailed,
    ContextTooLong,
    CutStream,
    ErrorReply,
    InvalidRequest,
    MalformedEvent,
    Reply,
    StreamFault,
    SuccessReply,
    Text,
    Timeout,
    Unavailable,
)
from .pacing import writing_seconds
from .transcription import TranscriptionEndpoint
from .turn import Turn, build_turn
from .wire import SseEvent, Sleep, json_response, send_broken_json, send_sse

Responder = Callable[[RequestRecord], Reply | None]
"""A callable policy: gets the request record, returns a reply (or None for the default)."""

MAX_BODY_BYTES = 64 * 1024 * 1024


class Dialect(Protocol):
    """What the server needs from one API's wire format."""

    @property
    def api(self) -> Api: ...

    call_id_prefix: str
    message_id_prefix: str
    request_id_header: str

    def blocks(self, body: Mapping[str, Any]) -> list[PromptBlock]: ...

    def validate(self, body: Mapping[str, Any], blocks: Sequence[PromptBlock]) -> ErrorReply | None: ...

    def usage(self, figures: CacheFigures, turn: Turn) -> dict[str, Any]: ...

    def error_body(self, error: ErrorReply, prompt_tokens: int, request_id: str) -> dict[str, Any]: ...

    def message(
        self, message_id: str, model: str, turn: Turn, usage: Mapping[str, Any], created: int
    ) -> dict[str, Any]: ...

    def sse_events(self, message: Mapping[str, Any], body: Mapping[str, Any], pace: float | None) -> list[SseEvent]: ...


ANTHROPIC = AnthropicDialect()
OPENAI = OpenAIDialect()


def default_reply(record: RequestRecord) -> Text:
    """The reply used when nothing is scripted: ``"ok: <first 40 chars of the last user text>"``."""
    return Text(f"ok: {record.last_user_text[:40]}")


def presented_key(request: web.Request) -> str | None:
    """The API key from ``x-api-key`` or ``Authorization: Bearer``, if any."""
    key = request.headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


async def read_json_object(request: web.Request) -> dict[str, Any] | None:
    """The request body as a JSON object, or None if it is not one."""
    try:
        body = json.loads(await request.read() or b"null")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


class ModelServer:
    """A local stand-in for the Anthropic and OpenAI APIs.

    Start once per session with :meth:`start`; call :meth:`reset` between
    tests. Replies come from the :meth:`script` queue, then :attr:`responder`,
    then :func:`default_reply`.

    Settings (all cleared by :meth:`reset`): ``responder``; ``latency`` (seconds
    every completion takes before it is answered, like a real model's think
    time; 0 by default); ``gate`` (an ``asyncio.Event``: completions wait until it is set, so a test
    can act while a turn is waiting for its model); ``context_limit``
    (an int, or a mapping of model name to int) above which requests get the
    API's context-length error; ``api_key`` (if set, other keys get 401); ``sleep`` (how a paced
    reply waits between its deltas, ``asyncio.sleep`` by default: a test may record the waits);
    ``anthropic_cache.min_cacheable_tokens``; ``openai_cache.ttl`` and
    ``openai_cache.min_cacheable_tokens``.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.clock = FakeClock()
        self.requests: list[RequestRecord] = []
        self._store = PrefixStore(self.clock)
        self._queue: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self._wake = asyncio.Event()
        self._generation = 0
        self.transcription = TranscriptionEndpoint()
        self.reset()

    # -- lifecycle ---------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (append ``/v1`` for the OpenAI client)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind to an ephemeral port on ``host`` and start serving."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/messages", self._anthropic_messages)
        app.router.add_post("/v1/messages/count_tokens", self._anthropic_count_tokens)
        app.router.add_post("/v1/chat/completions", self._openai_chat)
        self.transcription.add_routes(app.router)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Release any stalled requests and shut the server down."""
        self._release_stalls()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def reset(self) -> None:
        """Forget requests, scripts, cache, settings; rewind the clock."""
        self._release_stalls()
        self._queue.clear()
        self.requests.clear()
        self._store.clear()
        self.clock.reset()
        self._ids = itertools.count(1)
        self.responder: Responder | None = None
        self.latency = 0.0
        self.sleep: Sleep = asyncio.sleep
        self.gate: asyncio.Event | None = None
        self.context_limit: int | Mapping[str, int] | None = None
        self.api_key: str | None = None
        self.anthropic_cache = AnthropicCache(self._store)
        self.openai_cache = OpenAICache(self._store)
        self.transcription.reset()

    # -- scripting and inspection -------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; each completion request consumes the next one."""
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        return len(self._queue)

    @property
    def last_request(self) -> RequestRecord:
        """The most recent request (raises if there was none)."""
        if not self.requests:
            raise AssertionError("the model server has received no requests")
        return self.requests[-1]

    def requests_for(self, api: str, path: str | None = None) -> list[RequestRecord]:
        """Requests made to ``api`` (and ``path``, if given)."""
        return [record for record in self.requests if record.api == api and path in (None, record.path)]

    # -- handlers ------------------------------------------------------------

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, ANTHROPIC)

    async def _openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, OPENAI)

    async def _anthropic_count_tokens(self, request: web.Request) -> web.StreamResponse:
        record, body_ok = await self._record(request, ANTHROPIC)
        rejection = self._basic_rejection(request, body_ok)
        if rejection is not None:
            return self._fail(record, ANTHROPIC, rejection)
        record.status, record.response = 200, {"input_tokens": record.prompt_tokens}
        return json_response(record.response)

    async def _complete(self, request: web.Request, dialect: Dialect) -> web.StreamResponse:
        record, body_ok = await self._record(request, dialect)
        rejection = self._basic_rejection(request, body_ok) or self._prompt_rejection(record, dialect)
        if rejection is not None:
            return self._fail(record, dialect, rejection)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self.gate is not None:
            await self.gate.wait()
        reply = await self._resolve_reply(record)
        if isinstance(reply, ErrorReply):
            return self._fail(record, dialect, reply)
        return await self._succeed(request, record, dialect, reply)

    async def _record(self, request: web.Request, dialect: Dialect) -> tuple[RequestRecord, bool]:
        body = await read_json_object(request)
        headers = {name.lower(): value for name, value in request.headers.items()}
        record = RequestRecord(dialect.api, request.path, headers, body or {})
        record.blocks = dialect.blocks(record.body)
        self.requests.append(record)
        return record, body is not None

    # -- reply selection -------------------------------------------------------

    def _basic_rejection(self, request: web.Request, body_ok: bool) -> ErrorReply | None:
        key = presented_key(request)
        if key is None or (self.api_key is not None and key != self.api_key):
            return AuthFailed()
        return None if body_ok else InvalidRequest(message="request body must be a JSON object")

    def _prompt_rejection(self, record: RequestRecord, dialect: Dialect) -> ErrorReply | None:
        invalid = dialect.validate(record.body, record.blocks)
        if invalid is not None:
            return invalid
        limit = self._context_limit_for(record.model)
        if limit is not None and record.prompt_tokens > limit:
            return ContextTooLong(limit)
        return None

    def _context_limit_for(self, model: str) -> int | None:
        if isinstance(self.context_limit, Mapping):
            return self.context_limit.get(model)
        return self.context_limit

    async def _resolve_reply(self, record: RequestRecord) -> SuccessReply | StreamFault | ErrorReply:
        reply = self._next_reply(record)
        if not isinstance(reply, Timeout):
            return reply
        record.reply, record.stalled = reply, True
        generation = self._generation
        await self._stall(reply.bounded_seconds())
        if generation != self._generation:
            return Unavailable(message="the fake model server was reset while this request was stalled")
        return default_reply(record)

    def _next_reply(self, record: RequestRecord) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            computed = self.responder(record)
            if computed is not None:
                return computed
        return default_reply(record)

    async def _stall(self, seconds: float) -> None:
        wake = self._wake
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=seconds)

    def _release_stalls(self) -> None:
        self._generation += 1
        self._wake.set()
        self._wake = asyncio.Event()

    # -- responses ---------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    def _fail(self, record: RequestRecord, dialect: Dialect, error: ErrorReply) -> web.Response:
        request_id = self._new_id("req_fake_")
        record.reply, record.status = error, error.status_for(dialect.api)
        record.response = dialect.error_body(error, record.prompt_tokens, request_id)
        headers = {**error.headers(), dialect.request_id_header: request_id}
        return json_response(record.response, status=record.status, headers=headers)

    async def _succeed(
        self, request: web.Request, record: RequestRecord, dialect: Dialect, reply: SuccessReply | StreamFault
    ) -> web.StreamResponse:
        fault = reply if isinstance(reply, (CutStream, MalformedEvent)) else None
        turn = build_turn(fault.reply if fault else reply, lambda: self._new_id(dialect.call_id_prefix))
        cache = self.anthropic_cache if dialect.api == "anthropic" else self.openai_cache
        record.figures = cache.account(record.model, record.blocks)
        record.usage = dialect.usage(record.figures, turn)
        message_id = self._new_id(dialect.message_id_prefix)
        record.response = dialect.message(message_id, record.model, turn, record.usage, int(self.clock.now()))
        record.reply, record.status = reply, 200
        headers = {dialect.request_id_header: self._new_id("req_fake_")}
        if record.stream:
            events = dialect.sse_events(record.response, record.body, turn.pace)
            return await send_sse(request, events, headers, fault, self.sleep)
        if turn.pace is not None:  # the whole answer comes once the model has written it
            await self.sleep(writing_seconds(turn.text, turn.pace))
        if fault is not None:
            return await send_broken_json(request, record.response, headers, fault)
        return json_response(record.response, headers=headers)
