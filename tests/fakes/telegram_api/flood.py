"""Telegram's flood control as the Bot API documentation publishes it, for the emulator.

Telegram writes down three limits for what a bot sends: about one message a
second in one chat, 20 messages a minute in one group, and 30 messages a
second overall. :class:`FloodControl` counts every ``sendMessage``,
``editMessageText`` and ``sendMessageDraft`` against them (Telegram publishes
no limit of its own for drafts; they are counted like edits, which is what a
draft update is to the user) and says how long a refused call must wait, the
``retry_after`` of the 429 answer.

A private chat (positive id) takes 1 call a second; a group, supergroup or
channel (negative id) 20 calls a minute: its own, published limit, used instead
of the per-second one, the same numbers the Telegram adapter writes in its
capabilities (``chat_rate``). The overall limit counts every chat.

Calls are timed when they arrive, and a client that spaces them by the
published rate on its side sees them arrive a little closer together when the
network or its event loop was slow for one of them. ``grace`` (seconds) forgives
that much: a call is refused only when it arrives more than ``grace`` before
the window lets it in.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

COUNTED = frozenset({"sendmessage", "editmessagetext", "sendmessagedraft"})
"""The methods (lower case) the limits apply to."""


@dataclass(frozen=True, slots=True)
class Limit:
    count: int
    per: float


PRIVATE_CHAT = Limit(1, 1.0)
GROUP_CHAT = Limit(20, 60.0)
OVERALL = Limit(30, 1.0)


@dataclass(slots=True)
class _Window:
    """The arrival times of the calls within the last ``limit.per`` seconds."""

    limit: Limit
    times: deque[float] = field(default_factory=deque)

    def wait(self, now: float, grace: float) -> float:
        """Seconds until one more call fits (0.0: it fits now)."""
        while self.times and self.times[0] <= now - self.limit.per:
            self.times.popleft()
        if len(self.times) < self.limit.count:
            return 0.0
        free_at = self.times[len(self.times) - self.limit.count] + self.limit.per
        return 0.0 if free_at - now <= grace else free_at - now


class FloodControl:
    def __init__(self, *, grace: float = 0.2) -> None:
        self.grace = grace
        self._chats: dict[int, _Window] = {}
        self._overall = _Window(OVERALL)

    def admit(self, chat_id: int, now: float) -> int | None:
        """Count a call to ``chat_id`` arriving at ``now`` (monotonic seconds) if it fits every limit;
        otherwise count nothing and return the whole seconds to wait (at least 1), as Telegram does."""
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = _Window(PRIVATE_CHAT if chat_id > 0 else GROUP_CHAT)
        wait = max(chat.wait(now, self.grace), self._overall.wait(now, self.grace))
        if wait > 0:
            return max(1, math.ceil(wait))
        chat.times.append(now)
        self._overall.times.append(now)
        return None
