"""A local stand-in for Slack's Web API and its Socket Mode WebSocket, on aiohttp.

Web API (``POST`` or ``GET /api/<method>``, form, JSON or query arguments,
token in the ``Authorization`` header): auth.test, chat.postMessage,
chat.update, chat.startStream / appendStream / stopStream and
assistant.threads.setStatus (see :mod:`.streams`), apps.connections.open, conversations.replies and
conversations.history (over the bot's posts, with the ``metadata`` they were
posted with when ``include_all_metadata`` is set, and the user messages a test
recorded with :meth:`record`, see :mod:`.history`), users.info (over :attr:`FakeSlack.users`, see
:mod:`.users`, which can also answer ``missing_scope``) and files.info (over
:attr:`FakeSlack.files`, see :mod:`.files`, which also serves the files' downloads under
``/files-pri/``, to the bot token only); any other method answers ``{"ok": false, "error":
"unknown_method"}``. Every call is recorded in :attr:`FakeSlack.calls`; posts
and updates also land in :attr:`posts` and :attr:`updates`, and every change of
what a message shows (a post, an update, a stream's start, append and stop) in
:attr:`FakeSlack.shown` with the time (:attr:`FakeSlack.clock`), which is what
the benchmark reads first visible text from. Per-channel rate limits
(:mod:`.rates`, off unless ``rates.enabled``) answer 429 with Retry-After.

Socket Mode: apps.connections.open (with the app token) returns
``ws://127.0.0.1:<port>/socket/<n>``. On connect the fake sends ``hello``;
:meth:`FakeSlack.push_event` sends an ``events_api`` envelope and
:meth:`wait_acked` waits for the app's ack of it; :meth:`FakeSlack.say` is a
person posting: the message lands in the history and its event goes out.
Two ways Slack loses events: :attr:`FakeSlack.deaf` keeps the socket up (pings
answered) while every event is silently dropped, and :meth:`FakeSlack.reconnect`
closes the socket with messages posted while no connection was up, whose events
never come.

Buttons: chat.postMessage and chat.update take ``blocks`` (sections and actions blocks of buttons, checked as
Slack checks them, see :mod:`.buttons`); an update without ``blocks`` keeps the ones the message has, as
Slack's does. :meth:`FakeSlack.blocks_of` is what a message shows now; :meth:`FakeSlack.press` is a person
clicking one of its buttons: a ``block_actions`` payload in an ``interactive`` envelope on the socket, or
(:meth:`FakeSlack.press_payload`) the payload for a signed form POST in HTTP mode.

Failures are scripted per method with :meth:`fail_next` (a status, headers and
JSON body, or a dropped connection, before or after the call took effect) and
used up one per call.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from .buttons import block_actions, blocks_problem
from .files import Files
from .history import History
from .rates import ChannelRates
from .streams import Streams
from .users import Directory

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM_ID = "T0TEAM"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
BOT_NAME = "switchbot"
APP_ID = "A0APP"

Handler = Callable[[dict[str, Any], "str | None"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ApiCall:
    method: str
    args: dict[str, Any]
    token: str | None


@dataclass(frozen=True)
class Post:
    channel: str
    text: str
    thread_ts: str | None
    ts: str
    mrkdwn: Any
    metadata: Any = None
    blocks: Any = None


@dataclass(frozen=True)
class Shown:
    """A message's text changed: what it shows after ``method``, at ``at`` (``FakeSlack.clock``)."""

    method: str
    channel: str
    ts: str
    text: str
    at: float


@dataclass(frozen=True)
class Failure:
    """One scripted answer: an HTTP status, headers and JSON body, or ``drop`` the connection (``after`` the call)."""

    status: int = 200
    body: Mapping[str, Any] = field(default_factory=lambda: {"ok": False, "error": "internal_error"})
    headers: Mapping[str, str] = field(default_factory=dict)
    drop: bool = False
    after: bool = False

    @classmethod
    def rate_limited(cls, retry_after: int) -> Failure:
        return cls(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})

    @classmethod
    def error(cls, code: str) -> Failure:
        return cls(200, {"ok": False, "error": code})

    @classmethod
    def server_error(cls, status: int = 503) -> Failure:
        return cls(status, {"ok": False, "error": "service_unavailable"})

    @classmethod
    def dropped(cls) -> Failure:
        return cls(drop=True)

    @classmethod
    def answer_lost(cls) -> Failure:
        """Slack carries out the call, then the connection breaks before the answer is sent."""
        return cls(drop=True, after=True)


class FakeSlack:
    def __init__(self, host: str = "127.0.0.1", *, clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self._own_clock = clock
        self.clock = clock
        """The time rate limits and :attr:`shown` use (a test may replace it; :meth:`reset` puts it back)."""
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()
        self.reset()

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_get("/socket/{connection}", self._socket)
        app.router.add_get("/files-pri/{team_file}/{tail:.*}", self._file_download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, 0).start()
        self.port = self._runner.addresses[0][1]
        self.files.site = self.site

    async def stop(self) -> None:
        self.files.served.release()
        await self.close_sockets()
        if self._runner is not None:
            await self._runner.cleanup()

    def reset(self) -> None:
        self.clock = self._own_clock  # a test's stopped clock would hold every later test's windows shut
        self.calls: list[ApiCall] = []
        self.posts: list[Post] = []
        self.updates: list[dict[str, Any]] = []
        self.acks: list[dict[str, Any]] = []
        self.envelopes_sent: list[str] = []
        self.connections = 0
        self.deaf = False
        """Events are dropped (in :attr:`dropped`) while the socket stays up and answers pings."""
        self.dropped: list[str] = []
        self.history = History()
        self.users = Directory()
        if hasattr(self, "files"):
            self.files.served.release()  # a download a test left hanging ends now
        self.files = Files(self.site, TEAM_ID, BOT_TOKEN)
        """Files users shared (see :mod:`.files`)."""
        self.shown: list[Shown] = []
        self.rates = ChannelRates(lambda: self.clock())
        self.streams = Streams(self.history, self._next_ts, self._shown, author={"user": BOT_USER_ID, "bot_id": BOT_ID})
        self._failures: dict[str, deque[Failure]] = defaultdict(deque)
        self._sockets: list[web.WebSocketResponse] = []
        self._ts = itertools.count(1)
        self._envelope_ids = itertools.count(1)

    @property
    def site(self) -> str:
        """``http://host:port``: the Web API and the files' downloads are both here."""
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.site}/api/"

    # --- scripting and reading -------------------------------------------------------------
    def fail_next(self, method: str, *failures: Failure) -> None:
        self._failures[method].extend(failures)

    def record(self, payload: Mapping[str, Any]) -> None:
        """Add the message of an Events API payload (built by :mod:`.events`) to the workspace's history."""
        event = payload.get("event", payload)
        self.history.add(str(event["channel"]), {
            key: event[key]
            for key in ("type", "subtype", "user", "bot_id", "text", "ts", "thread_ts", "team", "files")
            if key in event
        })  # fmt: skip

    async def say(self, payload: Mapping[str, Any]) -> str:
        """A person posts: the message goes into the history and its event to the app (unless :attr:`deaf`)."""
        self.record(payload)
        return await self.push_event(payload)

    def calls_to(self, method: str) -> list[ApiCall]:
        return [call for call in self.calls if call.method == method]

    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float = 30.0) -> None:
        """Wait until ``predicate()`` holds (the timeout only stops a hang)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    def screen(self, channel: str) -> list[str]:
        """What ``channel`` shows of the bot now: each message's latest text (posted, streamed, updated),
        in the order the messages were created."""
        latest = {shown.ts: shown.text for shown in self.shown if shown.channel == channel}
        return [latest[ts] for ts in sorted(latest, key=float)]

    async def wait_posts(self, count: int, *, timeout: float = 30.0) -> list[Post]:
        await self.wait_for(lambda: len(self.posts) >= count, timeout=timeout)
        return list(self.posts)

    async def wait_connections(self, count: int, *, timeout: float = 30.0) -> None:
        await self.wait_for(lambda: self.connections >= count and len(self._open_sockets()) > 0, timeout=timeout)

    async def wait_acked(self, envelope_id: str, *, timeout: float = 30.0) -> dict[str, Any]:
        await self.wait_for(lambda: any(a.get("envelope_id") == envelope_id for a in self.acks), timeout=timeout)
        return next(a for a in self.acks if a.get("envelope_id") == envelope_id)

    # --- Socket Mode -----------------------------------------------------------------------
    async def push_event(self, body: Mapping[str, Any], *, retry_attempt: int = 0, retry_reason: str = "") -> str:
        """Send an ``events_api`` envelope with ``body`` (an event_callback) to the connected app."""
        return await self._push({
            "type": "events_api", "accepts_response_payload": False, "retry_attempt": retry_attempt,
            "retry_reason": retry_reason, "payload": dict(body),
        })  # fmt: skip

    def blocks_of(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """The blocks the message shows now (none for a message without blocks)."""
        return list(self.history.message(channel, ts).get("blocks") or [])

    def press_payload(self, channel: str, ts: str, action_id: str, user: str) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` clicking the button ``action_id`` of the message; raises
        ``ValueError`` when the message shows no such button (any more)."""
        return block_actions(self.history.message(channel, ts), channel, action_id, user, team=TEAM_ID, app=APP_ID)

    async def press(self, channel: str, ts: str, action_id: str, user: str) -> str:
        """Socket Mode: ``user`` clicks the button; returns the id of the ``interactive`` envelope (its ack is
        in :attr:`acks`, see :meth:`wait_acked`)."""
        payload = self.press_payload(channel, ts, action_id, user)
        return await self._push({"type": "interactive", "accepts_response_payload": False, "payload": payload})

    async def _push(self, envelope: dict[str, Any]) -> str:
        envelope_id = f"env-{next(self._envelope_ids)}"
        if self.deaf:
            self.dropped.append(envelope_id)
            return envelope_id
        envelope = {"envelope_id": envelope_id, **envelope}
        sockets = self._open_sockets()
        if not sockets:
            raise RuntimeError("no Socket Mode connection is open")
        await sockets[-1].send_str(json.dumps(envelope))
        self.envelopes_sent.append(envelope_id)
        return envelope_id

    async def reconnect(self, *, lost: Iterable[Mapping[str, Any]] = ()) -> None:
        """Drop the Socket Mode connection; ``lost`` are messages posted before the app's next ``hello``: they
        are in the history, their events are never sent (the app connects again by itself)."""
        for payload in lost:
            self.record(payload)
        await self.close_sockets()

    async def close_sockets(self) -> None:
        """Close every open Socket Mode connection (as Slack does on a refresh)."""
        for socket in list(self._sockets):
            await socket.close()

    def _open_sockets(self) -> list[web.WebSocketResponse]:
        return [s for s in self._sockets if not s.closed]

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(json.dumps({
            "type": "hello", "num_connections": len(self._open_sockets()),
            "connection_info": {"app_id": APP_ID}, "debug_info": {"host": "fake-slack"},
        }))  # fmt: skip
        await self._notify(lambda: setattr(self, "connections", self.connections + 1))
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                data = json.loads(message.data)
                await self._notify(lambda data=data: self.acks.append(data))
        return socket

    # --- Web API ---------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        args = await _arguments(request)
        token = _token(request, args)
        await self._notify(lambda: self.calls.append(ApiCall(method, args, token)))
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.startStream": self._stream_call(self.streams.start),
            "chat.appendStream": self._stream_call(self.streams.append),
            "chat.stopStream": self._stream_call(self.streams.stop),
            "assistant.threads.setStatus": self._stream_call(self.streams.set_status),
            "apps.connections.open": self._connections_open,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "users.info": self._users_info,
            "files.info": self.files.info,
        }.get(method)
        if self._failures[method]:
            failure = self._failures[method].popleft()
            if failure.after and handler is not None:
                await handler(args, token)
            if failure.drop:
                assert request.transport is not None
                request.transport.close()
                return web.Response()
            return web.json_response(dict(failure.body), status=failure.status, headers=dict(failure.headers))
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        retry_after = self.rates.admit(method, str(args.get("channel") or args.get("channel_id") or ""))
        if retry_after is not None:
            await self._notify(lambda: None)
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(retry_after)})  # fmt: skip
        return web.json_response(await handler(args, token))

    def _stream_call(self, call: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> Handler:
        async def handle(args: dict[str, Any], token: str | None) -> dict[str, Any]:
            return await call(args) if token == BOT_TOKEN else {"ok": False, "error": "invalid_auth"}

        return handle

    def _next_ts(self) -> str:
        return f"1800000000.{next(self._ts):06d}"

    async def _shown(self, method: str, channel: str, ts: str, text: str) -> None:
        shown = Shown(method, channel, ts, text, self.clock())
        await self._notify(lambda: self.shown.append(shown))

    async def _auth_test(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        return {
            "ok": True, "url": "https://fake.slack.test/", "team": "Fake Team", "user": BOT_NAME,
            "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False,
        }  # fmt: skip

    async def _post_message(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if (refused := _blocks_refused(args)) is not None:
            return refused
        ts = self._next_ts()
        metadata = args.get("metadata")  # slack_sdk posts JSON, so a dict
        post = Post(str(args["channel"]), str(args.get("text") or ""), args.get("thread_ts"), ts, args.get("mrkdwn"),
                    metadata, args.get("blocks"))  # fmt: skip
        self.history.add(post.channel, {
            "type": "message", "text": post.text, "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": ts,
            **({"thread_ts": post.thread_ts} if post.thread_ts else {}),
            **({"metadata": metadata} if metadata else {}),
            **({"blocks": post.blocks} if post.blocks else {}),
        })  # fmt: skip
        await self._notify(lambda: self.posts.append(post))
        await self._shown("chat.postMessage", post.channel, ts, post.text)
        return {"ok": True, "channel": post.channel, "ts": ts,
                "message": {"type": "message", "text": post.text, "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": ts}}

    async def _update(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        channel, ts, text = str(args.get("channel") or ""), str(args.get("ts") or ""), str(args.get("text") or "")
        if not any(p.ts == ts and p.channel == channel for p in self.posts) and (channel, ts) not in self.streams.messages:
            return {"ok": False, "error": "message_not_found"}
        if self.streams.streaming(channel, ts):
            return {"ok": False, "error": "cant_update_message"}  # a stream is stopped before it is edited
        if (refused := _blocks_refused(args)) is not None:
            return refused
        self.streams.updated(channel, ts, text)
        self.history.edit(channel, ts, text=text, **({"blocks": args["blocks"]} if "blocks" in args else {}))
        await self._notify(lambda: self.updates.append(dict(args)))
        await self._shown("chat.update", channel, ts, text)
        return {"ok": True, "channel": channel, "ts": ts, "text": text}

    async def _replies(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        return self.history.replies(args)

    async def _history(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        return self.history.channel(args)

    async def _users_info(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        return await self.users.info(args)

    async def _connections_open(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        if token != APP_TOKEN:
            return {"ok": False, "error": "invalid_auth" if token and token.startswith("xapp-") else "not_allowed_token_type"}
        return {"ok": True, "url": f"ws://{self.host}:{self.port}/socket/{self.connections + 1}"}

    async def _file_download(self, request: web.Request) -> web.StreamResponse:
        return await self.files.download(request)

    async def _notify(self, change: Callable[[], object]) -> None:
        async with self._changed:
            change()
            self._changed.notify_all()


def _blocks_refused(args: Mapping[str, Any]) -> dict[str, Any] | None:
    """Slack's answer to a call whose ``blocks`` it would not take; None without blocks or with good ones."""
    blocks = args.get("blocks")
    if isinstance(blocks, str):  # a form-encoded call carries them as JSON text
        try:
            blocks = json.loads(blocks)
        except ValueError:
            return {"ok": False, "error": "invalid_blocks_format"}
    if blocks is None:
        return None
    problem = blocks_problem(blocks)
    return None if problem is None else {"ok": False, "error": "invalid_blocks", "errors": [problem]}


async def _arguments(request: web.Request) -> dict[str, Any]:
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        if isinstance(body, dict):
            args.update(body)
    elif request.can_read_body:
        args.update(dict(await request.post()))
    return args


def _token(request: web.Request, args: Mapping[str, Any]) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    value = args.get("token")
    return str(value) if value else None
