"""The gateway half of the emulator: one WebSocket endpoint speaking Discord's gateway protocol v10.

HELLO on connect; HEARTBEAT is acknowledged; IDENTIFY opens a session (READY,
then GUILD_CREATE); RESUME re-attaches to a session and replays the events the
client missed, then RESUMED. Discord's close codes are used where Discord uses
them: 4004 for a bad token, 4014 for a privileged intent the application may
not use. A test can drop the socket, hold new connections back (to inject
events while the bot is away), or script a close code for the next IDENTIFY.

Trouble that loses events: :attr:`GatewayServer.deaf` keeps the socket up and its heartbeats
answered while every MESSAGE_CREATE is dropped (the message is still in the channel's history,
as on Discord), and :meth:`GatewayServer.invalidate` ends the session for good (INVALID_SESSION,
not resumable): what is posted until the bot has identified again is stored but never dispatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_api import payloads
from tests.fakes.discord_api.world import World

HEARTBEAT_INTERVAL_MS = 41_250
MESSAGE_CONTENT_INTENT = 1 << 15
PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | MESSAGE_CONTENT_INTENT
"""Server members, presences, message content: allowed only when switched on in the portal."""

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 9, 10, 11


@dataclass
class Session:
    id: str
    intents: int
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    """Every dispatch of the session: (sequence, event name, data)."""
    socket: web.WebSocketResponse | None = None

    @property
    def seq(self) -> int:
        return self.events[-1][0] if self.events else 0


class GatewayServer:
    def __init__(self, world: World, url: str) -> None:
        self.world = world
        self.url = url
        self.sessions: dict[str, Session] = {}
        self.current: Session | None = None
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.closes: list[int] = []
        """Close codes the emulator sent, in order."""
        self.connections = 0
        self.allowed_privileged_intents = 0
        """Which privileged intents the application has switched on in the portal (none by default)."""
        self.reject_next_identify: int | None = None
        self.deaf = False
        """Drop every MESSAGE_CREATE (the connection stays up, heartbeats are acknowledged)."""
        self.swallowed: list[str] = []
        """Ids of the messages whose MESSAGE_CREATE was dropped or went to a session nobody holds any more."""
        self._accepting = asyncio.Event()
        self._accepting.set()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._serve)

    # --- test controls --------------------------------------------------------------------
    async def dispatch(self, event: str, data: Any) -> int:
        """Send a DISPATCH on the current session (kept for replay if the bot is away); returns its sequence."""
        session = self.current
        if session is None:
            raise RuntimeError("no gateway session: the bot has not identified")
        if event == "MESSAGE_CREATE" and (self.deaf or session.id not in self.sessions):
            self.swallowed.append(str(data.get("id")))
            return session.seq
        seq = session.seq + 1
        session.events.append((seq, event, data))
        if session.socket is not None and not session.socket.closed:
            await session.socket.send_str(json.dumps({"op": OP_DISPATCH, "t": event, "s": seq, "d": data}))
        return seq

    async def drop(self, *, code: int = 4000, hold: bool = False) -> None:
        """Close the bot's socket as a network blip would; ``hold`` makes new connections wait for :meth:`release`."""
        if hold:
            self._accepting.clear()
        session = self.current
        if session is not None and session.socket is not None:
            socket, session.socket = session.socket, None
            self.closes.append(code)
            await socket.close(code=code, message=b"dropped by the test")

    async def invalidate(self, *, hold: bool = False) -> None:
        """End the current session for good, as Discord does when it cannot keep it: INVALID_SESSION (not
        resumable), so the bot identifies afresh. Messages posted until then are never dispatched; ``hold``
        makes the new connection wait for :meth:`release`, so a test can post some meanwhile."""
        if hold:
            self._accepting.clear()
        session = self.current
        self.sessions.clear()
        if session is not None and session.socket is not None:
            await self._send(session.socket, OP_INVALID_SESSION, False)

    def forget_sessions(self) -> None:
        """Make every existing session unresumable, as Discord does after a long outage."""
        self.sessions.clear()

    def hold(self) -> None:
        """Make new connections wait for :meth:`release` (the current one goes on): a reconnect that takes a while."""
        self._accepting.clear()

    def release(self) -> None:
        self._accepting.set()

    async def close_all(self) -> None:
        self._accepting.set()
        for session in self.sessions.values():
            if session.socket is not None:
                await session.socket.close(code=1001)

    # --- protocol -------------------------------------------------------------------------
    async def _serve(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self.connections += 1
        await self._accepting.wait()
        await self._send(socket, OP_HELLO, {"heartbeat_interval": HEARTBEAT_INTERVAL_MS})
        async for frame in socket:
            if frame.type is not WSMsgType.TEXT:
                break
            payload = json.loads(frame.data)
            op, data = payload.get("op"), payload.get("d")
            if op == OP_HEARTBEAT:
                await self._send(socket, OP_HEARTBEAT_ACK, None)
            elif op == OP_IDENTIFY:
                await self._identify(socket, data)
            elif op == OP_RESUME:
                await self._resume(socket, data)
        for session in self.sessions.values():
            if session.socket is socket:
                session.socket = None
        return socket

    async def _identify(self, socket: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identifies.append(data)
        code = self.reject_next_identify
        self.reject_next_identify = None
        if code is None and data.get("token") != self.world.token:
            code = 4004
        disallowed = int(data.get("intents", 0)) & PRIVILEGED_INTENTS & ~self.allowed_privileged_intents
        if code is None and disallowed:
            code = 4014
        if code is not None:
            self.closes.append(code)
            reason = b"Authentication failed." if code == 4004 else b"Disallowed intent(s)."
            await socket.close(code=code, message=reason)
            return
        session = Session(payloads.snowflake(), int(data.get("intents", 0)), socket=socket)
        self.sessions[session.id] = session
        self.current = session
        ready = {
            "v": 10, "user": self.world.bot, "guilds": [{"id": self.world.guild_id, "unavailable": True}],
            "session_id": session.id, "resume_gateway_url": self.url, "private_channels": [], "relationships": [],
            "application": {"id": self.world.app_id, "flags": 0}, "shard": [0, 1],
        }  # fmt: skip
        await self.dispatch("READY", ready)
        await self.dispatch("GUILD_CREATE", self.world.guild())

    async def _resume(self, socket: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.resumes.append(data)
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != self.world.token:
            await self._send(socket, OP_INVALID_SESSION, False)
            return
        session.socket = socket
        self.current = session
        since = int(data.get("seq") or 0)
        for seq, event, payload in session.events:
            if seq > since:
                await socket.send_str(json.dumps({"op": OP_DISPATCH, "t": event, "s": seq, "d": payload}))
        await self.dispatch("RESUMED", {})

    @staticmethod
    async def _send(socket: web.WebSocketResponse, op: int, data: Any) -> None:
        with contextlib.suppress(ConnectionResetError):
            await socket.send_str(json.dumps({"op": op, "d": data}))
