"""What ``bench.stream`` sees of the platforms: a recording proxy in front of each emulator's Web API,
and, from the calls it passed, what every chat shows.

The gateway's platform libraries (aiogram, discord.py, slack_sdk) are pointed at a
:class:`WatchProxy` instead of the emulator (``api_base_url``); the proxy passes every request
on unchanged and notes what it was (platform method, arguments), how the emulator answered
(status, JSON) and when the answer came back (``perf_counter``). Long polls, WebSockets
(Discord's gateway, Slack's Socket Mode) and the emulators' own state are left alone, so the
watch does not depend on how each emulator keeps its records.

:func:`read_call` turns one call into what the user saw change (:class:`Seen`), and
:class:`Screen` keeps, per chat, the messages shown now (after edits, appends and deletes) plus
the first time any reply text was visible there (a sent message, a draft or a stream start /
append with text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from tests.fakes.catch_all_proxy import HOP_BY_HOP, CatchAllProxy


@dataclass(frozen=True, slots=True)
class Call:
    """One Web API request the gateway made, as passed through the proxy."""

    platform: str
    http_method: str
    path: str
    args: dict[str, Any]
    status: int
    answer: Any
    """The emulator's JSON answer (None when it was not JSON)."""
    at: float
    """perf_counter() when the answer came back from the emulator."""


class WatchProxy(CatchAllProxy):
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``http://host:port``) that records every call."""

    def __init__(self, platform: str, upstream: str) -> None:
        super().__init__()
        self.platform = platform
        self.upstream = upstream.rstrip("/")
        self.calls: list[Call] = []
        self.listeners: list[Callable[[Call], None]] = []

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        url = self.upstream + str(request.rel_url)
        forwarded = self.session.request(request.method, url, headers=headers, data=body, allow_redirects=False)
        async with forwarded as upstream:
            payload = await upstream.read()
            answered = time.perf_counter()
            response = web.Response(body=payload, status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    response.headers[key] = value
        call = Call(self.platform, request.method, request.path, call_args(request, body), upstream.status,
                    _json(payload), answered)  # fmt: skip
        self.calls.append(call)
        for listener in self.listeners:
            listener(call)
        return response


def call_args(request: web.Request, body: bytes) -> dict[str, Any]:
    """The call's arguments: query, then a JSON object or a url-encoded form (a multipart body is not read)."""
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        parsed = _json(body)
        if isinstance(parsed, dict):
            args.update(parsed)
    elif request.content_type == "application/x-www-form-urlencoded":
        args.update(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
    return args


def _json(payload: bytes) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(payload)
    return None


# -- what a call changed on the user's screen -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """What one accepted call changed in a chat.

    ``kind``: ``send`` (a new message), ``edit`` (its text replaced), ``append`` (text added to a
    streamed message), ``draft`` (Telegram's ephemeral preview, not a message), ``delete``;
    ``rate_limited`` for a 429 answer (nothing changed).
    """

    kind: str
    chat: str
    message: str | None = None
    text: str = ""


TELEGRAM_PATH = re.compile(r"/bot[^/]+/(\w+)$")
DISCORD_MESSAGES = re.compile(r"/api/v\d+/channels/(\d+)/messages(?:/(\d+))?$")
SLACK_PATH = re.compile(r"/api/([\w.]+)$")
DISCORD_VERSION = re.compile(r"^/api/v\d+")
DISCORD_ID = re.compile(r"/\d+")


def read_call(call: Call) -> Seen | None:
    """What ``call`` changed in which chat; None for a call that changed nothing a user sees."""
    if call.status == 429 or (isinstance(call.answer, dict) and call.answer.get("error") == "ratelimited"):
        return Seen("rate_limited", "")
    if call.status != 200:
        return None
    reader = {"telegram": _telegram, "discord": _discord, "slack": _slack}[call.platform]
    return reader(call)


def call_name(call: Call) -> str:
    """``platform method``: Telegram's and Slack's method, Discord's HTTP method and route without ids."""
    if call.platform == "discord":
        route = DISCORD_ID.sub("/{id}", DISCORD_VERSION.sub("", call.path))
        return f"discord {call.http_method} {route}"
    match = (TELEGRAM_PATH if call.platform == "telegram" else SLACK_PATH).search(call.path)
    return f"{call.platform} {match.group(1) if match else call.path}"


def _telegram(call: Call) -> Seen | None:
    match = TELEGRAM_PATH.search(call.path)
    answer = call.answer if isinstance(call.answer, dict) else {}
    if match is None or not answer.get("ok"):
        return None
    method, chat = match.group(1).lower(), str(call.args.get("chat_id", ""))
    result = answer.get("result")
    if method == "sendmessage" and isinstance(result, dict):
        return Seen("send", chat, str(result["message_id"]), str(result.get("text") or ""))
    if method == "editmessagetext" and isinstance(result, dict):
        return Seen("edit", chat, str(result["message_id"]), str(result.get("text") or ""))
    if method == "sendmessagedraft":
        return Seen("draft", chat, None, str(call.args.get("text") or ""))
    if method == "deletemessage":
        return Seen("delete", chat, str(call.args.get("message_id")))
    return None


def _discord(call: Call) -> Seen | None:
    match = DISCORD_MESSAGES.search(call.path)
    answer = call.answer if isinstance(call.answer, dict) else {}
    if match is None:
        return None
    chat, message = match.groups()
    if call.http_method == "POST" and message is None:
        return Seen("send", chat, str(answer.get("id")), str(answer.get("content") or ""))
    if call.http_method == "PATCH" and message is not None:
        return Seen("edit", chat, message, str(answer.get("content") or ""))
    if call.http_method == "DELETE" and message is not None:
        return Seen("delete", chat, message)
    return None


def _slack(call: Call) -> Seen | None:
    match = SLACK_PATH.search(call.path)
    answer = call.answer if isinstance(call.answer, dict) else {}
    if match is None or not answer.get("ok"):
        return None
    method, chat = match.group(1), str(call.args.get("channel") or answer.get("channel") or "")
    text = str(call.args.get("markdown_text") or call.args.get("text") or "")
    if method in ("chat.postMessage", "chat.startStream"):
        return Seen("send", chat, str(answer.get("ts")), text)
    if method == "chat.update":
        return Seen("edit", chat, str(call.args.get("ts")), text)
    if method in ("chat.appendStream", "chat.stopStream"):
        return Seen("append", chat, str(call.args.get("ts")), text) if text or method == "chat.appendStream" else None
    if method == "chat.delete":
        return Seen("delete", chat, str(call.args.get("ts")))
    return None


# -- every chat's screen ----------------------------------------------------------------------------


@dataclass
class ChatScreen:
    """One chat: its messages as shown now (in the order they were sent) and what happened when."""

    messages: dict[str, str] = field(default_factory=dict)
    first_visible: float | None = None
    updates: int = 0
    """Accepted changes after a message was shown: edits, appends, drafts after the first."""
    drafts: int = 0


class Screen:
    """What each chat shows, built from the calls the proxies passed; :attr:`changed` is set at every change."""

    def __init__(self) -> None:
        self.chats: dict[str, ChatScreen] = {}
        self.rate_limited: dict[str, int] = {}
        self.refused: list[str] = []
        """Every call answered 429, as ``platform method`` (:func:`call_name`), in the order answered."""
        self.changed = asyncio.Event()

    def watch(self, proxy: WatchProxy) -> None:
        proxy.listeners.append(self.record)

    def chat(self, key: str) -> ChatScreen:
        return self.chats.setdefault(key, ChatScreen())

    def record(self, call: Call) -> None:
        seen = read_call(call)
        if seen is None:
            return
        if seen.kind == "rate_limited":
            self.rate_limited[call.platform] = self.rate_limited.get(call.platform, 0) + 1
            self.refused.append(call_name(call))
            return
        screen = self.chat(f"{call.platform}:{seen.chat}")
        if seen.text.strip() and screen.first_visible is None:
            screen.first_visible = call.at
        elif seen.kind in ("edit", "append", "draft"):
            screen.updates += 1
        if seen.kind == "send" and seen.message is not None:
            screen.messages[seen.message] = seen.text
        elif seen.kind == "edit" and seen.message in screen.messages:
            screen.messages[seen.message] = seen.text
        elif seen.kind == "append" and seen.message in screen.messages:
            screen.messages[seen.message] += seen.text
        elif seen.kind == "delete":
            screen.messages.pop(seen.message or "", None)
        screen.drafts += seen.kind == "draft"
        self.changed.set()
