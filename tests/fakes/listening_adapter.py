"""A stand-in platform whose connection can go deaf: for the gateway's liveness monitor and catch-up.

:class:`ListeningAdapter` is the loopback adapter with a platform behind it that keeps every
message users send (``history``), the way Discord and Slack keep a channel's messages whether or
not the bot's socket delivered them. A test makes the connection deaf (``deaf = True``: messages
reach the history but not the gateway), and the adapter then does what the contract asks of a real
one: its probe looks at the chats it is given for messages newer than the last one the gateway
stored and fails with ``missed`` when it finds some; ``reconnect`` marks it degraded and (unless
the test holds it) comes back running with its hearing restored; ``catch_up`` returns the history
after each point's message, oldest first, with the event ids live delivery uses. What the test
wants to see differently it sets: ``probe_hangs``, ``probe_result``, ``can_reconnect``,
``hold_reconnect``, ``catch_up_gate``, ``catch_up_error``, ``ignore_after``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

from adapters.contract import (
    AdapterError,
    AdapterState,
    CatchUpPoint,
    CatchUpWindow,
    ChatType,
    InboundMessage,
    Liveness,
)
from tests.fakes.adapter import LoopbackAdapter


class ListeningAdapter(LoopbackAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.history: list[InboundMessage] = []
        """Every message users sent, in order (what the platform would return from its history API)."""
        self._ids = itertools.count(1001)
        self.deaf = False
        """The connection is up but the platform's events no longer reach it."""
        self.probe_hangs = False
        self.probe_result: Liveness | None = None
        """What every probe returns, instead of looking at the history."""
        self.probed: list[Sequence[CatchUpPoint]] = []
        self.can_reconnect = True
        """False: ``reconnect`` raises AdapterError, as the contract's default does."""
        self.hold_reconnect = False
        """True: a reconnect stays degraded until :meth:`connected_again`."""
        self.reconnects: list[str] = []
        self.catch_ups: list[tuple[Sequence[CatchUpPoint], CatchUpWindow]] = []
        self.catch_up_gate: asyncio.Event | None = None
        """Set: a catch-up waits for it before answering (a slow history API)."""
        self.catch_up_error: Exception | None = None
        """Raised by the next catch-up (the history API failing), once."""
        self.ignore_after = False
        """True: a catch-up returns the whole window, messages the gateway has among them."""

    async def say(
        self, text: str, *, chat_id: str = "chat-1", user_id: str = "user-1", sent_at: float | None = None,
        chat_type: ChatType = ChatType.DM, **fields: Any,
    ) -> InboundMessage:  # fmt: skip
        """A user sends ``text``: the platform keeps it and, unless deaf, the connection delivers it."""
        message_id = str(next(self._ids))
        message = InboundMessage(
            platform=self.platform, event_id=f"{chat_id}:{message_id}", chat_id=chat_id, chat_type=chat_type,
            user_id=user_id, text=text, message_id=message_id, timestamp=time.time() if sent_at is None else sent_at,
            **fields,
        )  # fmt: skip
        self.history.append(message)
        if not self.deaf:
            if self._intake is None:
                raise RuntimeError("the adapter is not accepting messages")
            self._note_inbound()
            await self._intake(message)
        return message

    def _after(self, point: CatchUpPoint, since: float) -> list[InboundMessage]:
        return [
            m for m in self.history
            if m.chat_id == point.chat_id and m.thread_id == point.thread_id and m.timestamp >= since
            and (point.after is None or self.ignore_after or int(m.message_id or 0) > int(point.after))
        ]  # fmt: skip

    async def probe_liveness(self, points: Sequence[CatchUpPoint]) -> Liveness:
        self.probed.append(points)
        if self.probe_hangs:
            await asyncio.Event().wait()
        if self.probe_result is not None:
            return self.probe_result
        unseen = sum(len(self._after(point, 0.0)) for point in points)
        if unseen:
            return Liveness(False, f"{unseen} messages newer than the last received", latency=0.01, missed=True)
        return Liveness(True, "history holds nothing unseen", latency=0.01)

    async def reconnect(self, reason: str) -> None:
        self.reconnects.append(reason)
        if not self.can_reconnect:
            raise AdapterError("this stand-in cannot reconnect")
        self._set_state(AdapterState.DEGRADED, reason)
        if not self.hold_reconnect:
            asyncio.get_running_loop().call_soon(self.connected_again)

    def connected_again(self) -> None:
        self.deaf = False
        self._set_state(AdapterState.RUNNING, "connected again")

    async def catch_up(self, points: Sequence[CatchUpPoint], window: CatchUpWindow) -> list[InboundMessage]:
        self.catch_ups.append((points, window))
        if self.catch_up_gate is not None:
            await self.catch_up_gate.wait()
        if self.catch_up_error is not None:
            error, self.catch_up_error = self.catch_up_error, None
            raise error
        found = [m for point in points for m in self._after(point, window.since)[-window.per_chat:]]
        return sorted(found, key=lambda m: int(m.message_id or 0))[-window.total:]
