"""A tiny chat platform that lives outside the gateway process, so a test can kill the gateway.

It keeps what a real platform keeps across a bot's crash: the user messages
not yet acknowledged, and every message the bot sent. The wire protocol is a
small copy of Telegram's long polling:

``GET /updates?offset=N&timeout=S[&limit=L]``
    Asking with ``offset=N`` acknowledges every update with an id below ``N``;
    those are never served again. The answer is ``{"updates": [...]}`` with the
    unacknowledged updates with id >= N, oldest first, waiting up to ``S``
    seconds for one to arrive when there are none. An update is
    ``{"update_id", "chat_id", "user_id", "text", "message_id"}``.

``POST /send`` with ``{"chat_id", "text", "reply_to", "nonce"}``
    Records the bot's message and answers ``{"message_id": "s<n>"}``. A send
    whose ``nonce`` was seen before is not delivered again: the platform
    answers with the first message's id and counts the repeat (the adapter
    contract: the same nonce means the same chunk sent again).

Update ids and sent message ids are sequential, so a run is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass

from aiohttp import web

MAX_POLL_SECONDS = 30.0
DEFAULT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Update:
    """One user message waiting for the bot."""

    update_id: int
    chat_id: str
    user_id: str
    text: str
    message_id: str


@dataclass(frozen=True, slots=True)
class Sent:
    """One message the bot sent (or tried to send again, for :attr:`RelayPlatform.repeats`)."""

    message_id: str
    chat_id: str
    text: str
    reply_to: str | None
    nonce: str | None


class RelayPlatform:
    """The platform: a log of user messages served by long polling, and a log of the bot's sends."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.updates: list[Update] = []
        """Every user message ever posted, in update id order (ids start at 1)."""
        self.acknowledged = 0
        """Every update with an id below this was acknowledged by the bot."""
        self.sent: list[Sent] = []
        """Messages delivered to the chats, in the order the platform accepted them."""
        self.repeats: list[Sent] = []
        """Sends dropped because their nonce had been delivered already."""
        self.edits: list[Sent] = []
        """Edits of sent messages, in order (``message_id`` names the message edited)."""
        self.showing: dict[str, str] = {}
        """What each sent message shows now, by message id (its text, or its last edit's)."""
        self._by_nonce: dict[str, Sent] = {}
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind to an ephemeral port and serve."""
        app = web.Application()
        app.router.add_get("/updates", self._get_updates)
        app.router.add_post("/send", self._send)
        app.router.add_post("/edit", self._edit)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop serving (waiting long polls are answered or dropped)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def post(self, chat_id: str, text: str, *, user_id: str | None = None) -> Update:
        """A user writes ``text`` in ``chat_id``; returns the queued update."""
        async with self._changed:
            update_id = len(self.updates) + 1
            update = Update(update_id, chat_id, user_id or f"user-{chat_id}", text, f"{chat_id}:{update_id}")
            self.updates.append(update)
            self._changed.notify_all()
        return update

    def unacknowledged(self) -> list[Update]:
        """Updates the bot has not acknowledged yet."""
        return [u for u in self.updates if u.update_id >= self.acknowledged]

    async def wait_until(self, predicate: Callable[[], bool], *, timeout: float) -> None:
        """Wait until ``predicate()`` holds after some update or send (the timeout only stops a hang)."""
        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(predicate)

    # -- handlers ------------------------------------------------------------------------------

    async def _get_updates(self, request: web.Request) -> web.Response:
        try:
            offset = int(request.query.get("offset", "0"))
            timeout = min(float(request.query.get("timeout", "0")), MAX_POLL_SECONDS)
            limit = int(request.query.get("limit", str(DEFAULT_LIMIT)))
        except ValueError:
            return web.json_response({"error": "offset, timeout and limit must be numbers"}, status=400)
        async with self._changed:
            self.acknowledged = max(self.acknowledged, offset)
            self._changed.notify_all()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait_for(lambda: bool(self.unacknowledged()))
            pending = self.unacknowledged()[:limit]
        return web.json_response({"updates": [asdict(u) for u in pending]})

    async def _send(self, request: web.Request) -> web.Response:
        body = await request.json()
        chat_id, text = body.get("chat_id"), body.get("text")
        if not isinstance(chat_id, str) or not isinstance(text, str) or not text:
            return web.json_response({"error": "chat_id and a non-empty text are required"}, status=400)
        nonce = body.get("nonce")
        async with self._changed:
            first = self._by_nonce.get(nonce) if nonce else None
            if first is not None:
                self.repeats.append(Sent(first.message_id, chat_id, text, body.get("reply_to"), nonce))
                return web.json_response({"message_id": first.message_id, "repeat": True})
            sent = Sent(f"s{len(self.sent) + 1}", chat_id, text, body.get("reply_to"), nonce)
            self.sent.append(sent)
            self.showing[sent.message_id] = text
            if nonce:
                self._by_nonce[nonce] = sent
            self._changed.notify_all()
        return web.json_response({"message_id": sent.message_id})

    async def _edit(self, request: web.Request) -> web.Response:
        body = await request.json()
        chat_id, message_id, text = body.get("chat_id"), body.get("message_id"), body.get("text")
        if not isinstance(text, str) or not text or not isinstance(message_id, str):
            return web.json_response({"error": "message_id and a non-empty text are required"}, status=400)
        async with self._changed:
            if message_id not in self.showing:
                return web.json_response({"error": "message to edit not found"}, status=400)
            self.edits.append(Sent(message_id, str(chat_id), text, None, None))
            self.showing[message_id] = text
            self._changed.notify_all()
        return web.json_response({"ok": True})
