"""The per-chat rate budget: every send and edit the gateway makes waits here for its turn.

A platform answers 429 when a bot writes to one chat, or to all its chats together, faster than
it allows. :class:`ChatBudget` keeps the gateway inside those rates instead of learning them from
429s: each call first :meth:`~ChatBudget.take`\\ s one unit of its chat's rate
(``Adapter.chat_rate``) and of the platform's overall rate (``capabilities.rates.overall``), and
waits while either is spent or the chat is held after a 429 (:meth:`~ChatBudget.hold`).

Each rate is a sliding window: at most ``count`` calls in any ``per`` seconds, counted from when
they were let through, and again from when they ended (:meth:`~ChatBudget.finished`, which
:meth:`~ChatBudget.write` calls): the platform counts a call when it arrives, somewhere in
between, and a call the network or a busy event loop held up must not leave the next one arriving
early. (A token bucket would let a full bucket out at once and then refill, which
puts up to twice the count into one window: a platform counting windows answers 429 to that.)
Appends to a platform's own stream (Slack's ``chat.appendStream``) have a rate of their own,
not the chat's: :meth:`~ChatBudget.take_append` keeps every stream of one chat together at one
append per the adapter's ``rates.stream_interval`` (two streams in one channel share it).
Callers waiting for the overall rate are let through in the order they came, so under load every
chat moves, the oldest first; a caller whose own chat is spent or held never holds back another
chat. A chat's window is forgotten once it has nothing left to say (its calls older than its
period, no hold), so the memory follows the chats written to lately, not every chat ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from adapters.contract import Adapter, Rate

Sleep = Callable[[float], Awaitable[None]]

MARGIN = 0.05
"""Seconds added to every rate's period: a call is counted when it is let through, the platform
counts it when it arrives, and two calls may cross the network at different speeds."""

_SWEEP_AT = 1024
"""Chats remembered before idle ones are first swept out (then: twice as many as were left)."""


class _Window:
    """At most ``rate.count`` calls in any ``rate.per`` (+ :data:`MARGIN`) seconds."""

    __slots__ = ("_calls", "rate")

    def __init__(self, rate: Rate) -> None:
        self.rate = rate
        self._calls: deque[float] = deque(maxlen=rate.count)

    def ready_at(self, now: float) -> float:
        """When one more call fits (``now`` or earlier: it fits now)."""
        if len(self._calls) < self.rate.count:
            return now
        return self._calls[0] + self.rate.per + MARGIN

    def count(self, now: float) -> None:
        self._calls.append(now)

    def restamp(self, now: float) -> None:
        """The latest call ended at ``now``: it counts from then (never earlier than it was let through)."""
        if self._calls and self._calls[-1] < now:
            self._calls[-1] = now

    def resized(self, rate: Rate | None) -> _Window:
        """The same calls counted against another ``rate`` (the newest ones, as many as it holds)."""
        window = _Window(rate or self.rate)
        window._calls.extend(self._calls)
        return window

    def idle(self, now: float) -> bool:
        """Whether the window no longer holds back anything."""
        return not self._calls or self._calls[-1] + self.rate.per + MARGIN <= now


@dataclass(slots=True)
class _Chat:
    window: _Window
    held_until: float = 0.0
    waiting: int = 0
    """Callers inside :meth:`ChatBudget.take` for this chat (a chat with any is never forgotten)."""


@dataclass(slots=True)
class _Caller:
    chat: _Chat
    let_through: bool = False


@dataclass(slots=True)
class _Platform:
    overall: _Window | None
    queue: dict[int, _Caller] = field(default_factory=dict)
    """Callers waiting, by ticket: the order they came in (dicts keep it)."""


class ChatBudget:
    """Every platform's sends and edits, kept inside each chat's rate and the platform's overall rate.

    ``intervals``: ``platforms.<name>.stream_edit_interval`` where configured
    (:meth:`stream_interval`). ``clock`` and ``sleep`` are the monotonic clock and the pause the
    waits use (tests pass their own, which move the clock on).
    """

    def __init__(
        self,
        adapters: Mapping[str, Adapter],
        *,
        intervals: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._adapters = adapters
        self._intervals = dict(intervals or {})
        self._clock = clock
        self._sleep = sleep
        self._chats: dict[tuple[str, str], _Chat] = {}
        self._appends: dict[tuple[str, str], _Window] = {}
        """(platform, chat) -> the appends to the chat's streams, at the adapter's stream rate."""
        self._platforms: dict[str, _Platform] = {}
        self._tickets = itertools.count()
        self._sweep_at = _SWEEP_AT
        self._share = 1

    @property
    def share(self) -> int:
        """How many gateways share each platform's overall rate (1 outside a cluster)."""
        return self._share

    def share_with(self, replicas: int) -> None:
        """Several gateways (a cluster) send for the same bots: each keeps to its part of every platform's overall
        rate (``count // replicas``, at least one call), so together they stay inside it. Chats keep their own rate:
        a chat's sessions run on one replica at a time (a group with a session per user may be the exception)."""
        share = max(1, replicas)
        if share == self._share:
            return
        self._share = share
        for platform, state in self._platforms.items():
            if state.overall is not None:
                state.overall = state.overall.resized(self._overall_rate(platform))

    def add_sender(self, sender: Adapter) -> None:
        """Keep the rates of one more sender (``Delivery.add_sender``)."""
        self._adapters = {**self._adapters, sender.platform: sender}

    async def take(self, platform: str, chat_id: str) -> None:
        """Wait until one more call to ``chat_id`` fits its chat's rate, the platform's overall rate and
        any hold, then count it. Callers held back by the overall rate go in the order they came."""
        chat = self._chat(platform, chat_id)
        queue = self._platform(platform).queue
        ticket = next(self._tickets)
        caller = queue[ticket] = _Caller(chat)
        chat.waiting += 1
        try:
            while True:
                self._let_through(platform)
                if caller.let_through:
                    return
                await self._sleep(self._wait(platform, chat))
        finally:
            chat.waiting -= 1
            queue.pop(ticket, None)

    @contextlib.asynccontextmanager
    async def write(self, platform: str, chat_id: str, *, append: bool = False) -> AsyncIterator[None]:
        """One call to the chat inside the block: :meth:`take` (:meth:`take_append` for an append to a
        stream) before it, :meth:`finished` after it, whatever it raised."""
        await (self.take_append if append else self.take)(platform, chat_id)
        try:
            yield
        finally:
            self.finished(platform, chat_id, append=append)

    def finished(self, platform: str, chat_id: str, *, append: bool = False) -> None:
        """The call last let through to the chat (an append: to its streams) has ended: it counts from now."""
        if append:
            window = self._appends.get((platform, chat_id))
        else:
            chat = self._chats.get((platform, chat_id))
            window = chat.window if chat is not None else None
        if window is not None:
            window.restamp(self._clock())

    async def take_append(self, platform: str, chat_id: str) -> None:
        """Wait until one more append to a stream in ``chat_id`` fits: one per the adapter's default
        ``rates.stream_interval`` for all the chat's streams together, and none while the chat is held.
        Not counted in the chat's rate for sends and edits, nor the platform's overall rate."""
        window = self._append_window(platform, chat_id)
        while True:
            wait = self.append_available_in(platform, chat_id)
            if wait <= 0:
                window.count(self._clock())
                return
            await self._sleep(wait)

    def append_available_in(self, platform: str, chat_id: str) -> float:
        """Seconds until :meth:`take_append` for this chat would not wait (0.0: now)."""
        now = self._clock()
        chat = self._chats.get((platform, chat_id))
        ready = max(self._append_window(platform, chat_id).ready_at(now), chat.held_until if chat else now)
        return max(0.0, ready - now)

    def available_in(self, platform: str, chat_id: str) -> float:
        """Seconds until :meth:`take` for this chat would not wait (0.0: now), as things stand: callers
        already waiting for the platform's overall rate may still go first."""
        chat = self._chats.get((platform, chat_id))
        if chat is None:
            overall = self._platform(platform).overall
            return max(0.0, overall.ready_at(self._clock()) - self._clock()) if overall else 0.0
        return self._wait(platform, chat)

    def hold(self, platform: str, chat_id: str, seconds: float) -> None:
        """The platform answered a call to this chat with 429 and ``retry_after`` = ``seconds``: nothing
        more goes to the chat before then (other chats are not held back)."""
        chat = self._chat(platform, chat_id)
        chat.held_until = max(chat.held_until, self._clock() + max(0.0, seconds))

    def stream_interval(self, platform: str) -> float:
        """The least number of seconds between two updates of one streamed message on ``platform``:
        ``platforms.<name>.stream_edit_interval`` when set, else the adapter's own default."""
        configured = self._intervals.get(platform)
        if configured is not None:
            return configured
        return self._adapters[platform].capabilities.rates.stream_interval

    def remembered(self) -> int:
        """How many chats the budget keeps a window or a hold for."""
        return len(self._chats)

    # --- internals ---------------------------------------------------------------------------
    def _let_through(self, platform: str) -> None:
        """Count and let through every waiting caller that fits now, in the order they came."""
        state = self._platforms[platform]
        now = self._clock()
        for caller in state.queue.values():
            if caller.let_through:
                continue
            chat = caller.chat
            if chat.held_until > now or chat.window.ready_at(now) > now:
                continue  # this chat waits; the callers behind it for other chats need not
            if state.overall is not None:
                if state.overall.ready_at(now) > now:
                    break  # the platform is spent: the earliest callers go first when it frees up
                state.overall.count(now)
            chat.window.count(now)
            caller.let_through = True

    def _wait(self, platform: str, chat: _Chat) -> float:
        now = self._clock()
        ready = max(chat.held_until, chat.window.ready_at(now))
        overall = self._platforms[platform].overall
        if overall is not None:
            ready = max(ready, overall.ready_at(now))
        return max(0.0, ready - now)

    def _chat(self, platform: str, chat_id: str) -> _Chat:
        key = (platform, chat_id)
        chat = self._chats.get(key)
        if chat is None:
            if len(self._chats) >= self._sweep_at:
                self._forget_idle()
            self._platform(platform)  # an unknown platform fails here, before anything is kept
            chat = self._chats[key] = _Chat(_Window(self._adapters[platform].chat_rate(chat_id)))
        return chat

    def _append_window(self, platform: str, chat_id: str) -> _Window:
        key = (platform, chat_id)
        window = self._appends.get(key)
        if window is None:
            self._platform(platform)  # an unknown platform fails here, before anything is kept
            window = self._appends[key] = _Window(Rate(1, self._adapters[platform].capabilities.rates.stream_interval))
        return window

    def _platform(self, platform: str) -> _Platform:
        state = self._platforms.get(platform)
        if state is None:
            overall = self._overall_rate(platform)
            state = self._platforms[platform] = _Platform(_Window(overall) if overall else None)
        return state

    def _overall_rate(self, platform: str) -> Rate | None:
        overall = self._adapters[platform].capabilities.rates.overall
        if overall is None or self._share == 1:
            return overall
        return Rate(max(1, overall.count // self._share), overall.per)

    def _forget_idle(self) -> None:
        now = self._clock()
        for key in [key for key, chat in self._chats.items()
                    if not chat.waiting and chat.held_until <= now and chat.window.idle(now)]:  # fmt: skip
            del self._chats[key]
        for key in [key for key, window in self._appends.items() if window.idle(now)]:
            del self._appends[key]
        self._sweep_at = max(_SWEEP_AT, 2 * len(self._chats))
