"""One turn's streamed reply: the text as the model writes it, shown at the platform's pace.

The agent hands over the full text so far (:meth:`ReplyStream.text`, from the turn observer's
``on_text``: synchronous, it only keeps the latest text and wakes the worker) and the tools it
calls (:meth:`ReplyStream.tools`). One worker task shows them, coalesced: the latest text wins,
nothing is queued. An update goes out at most every ``stream_interval`` seconds of the platform
and only when the chat's rate budget has room now (then it takes it), so the stream slows down
under pressure instead of piling up edits; a 429 holds the chat for its ``retry_after`` and
doubles the interval. The first message (EDIT, NATIVE) waits for a sentence or about a second of
text, so a reply does not start with a lone word; a draft (DRAFT) has nothing left behind and
starts at once. Only whole words are shown: the word being written waits for the next update
(a credential is shown, masked, only once it is complete).

The way to show it is the first the platform offers for the chat that it has not refused
(:class:`StreamRefusals`); ``StreamingUnsupported`` falls back to the next (``stream.fallback``)
and is remembered. A natively streamed message whose text stops extending goes on as an edited one.

Before the turn's answer is committed the stream is stopped (:meth:`stop`: the update in flight
is finished and recorded, a native stream is ended); the commit makes the streamed message the
reply's first chunk, and delivery edits it to the final text. A turn stopped by ``/stop`` or an
interrupt ends its message with a mark (:meth:`stopped`). Streaming is best effort: a failure
is logged and the answer is delivered as without it. A gateway that may no longer write to the
platform (``Delivery.may_send``: one of several whose replica expired) shows nothing more and
leaves the message live, for the replica that runs the turn again to take over.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Iterable
from typing import Final

import structlog

from adapters.contract import Adapter, AdapterError, DeliveryError, RateLimited, StreamingUnsupported, StreamMode
from gateway.delivery.outbox import Delivery
from gateway.delivery.progress import working_line
from gateway.delivery.streaming.draft import DraftSurface
from gateway.delivery.streaming.edited import EditSurface
from gateway.delivery.streaming.native import NativeSurface, NotExtending
from gateway.delivery.streaming.refusals import StreamRefusals
from gateway.delivery.streaming.surface import RecordedSurface, StreamTarget, Surface
from gateway.operations.metrics import Metrics
from gateway.operations.redaction import redactor
from storage import StorageEngine

log = structlog.get_logger("gateway.stream")

FIRST_AFTER: Final = 1.0
"""Seconds of text after which the first message goes out even without a whole sentence."""
MAX_INTERVAL: Final = 30.0
"""The slowest a stream gets after repeated 429s."""
MAX_FAILURES: Final = 5
"""Failed updates in a row after which the stream shows nothing more (the answer still comes)."""

_SENTENCE: Final = re.compile(r"[.!?…]\s|\n")
_SURFACES: Final[dict[StreamMode, type[Surface]]] = {
    StreamMode.DRAFT: DraftSurface,
    StreamMode.EDIT: EditSurface,
    StreamMode.NATIVE: NativeSurface,
}


def whole_words(text: str) -> str:
    """``text`` without the word still being written: up to and with its last whitespace."""
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return text[: cut + 1]


class ReplyStream:
    """The streamed reply of one turn: ``text``/``tools`` as it runs, then ``stop`` (or ``stopped``)."""

    def __init__(
        self,
        target: StreamTarget,
        *,
        modes: Iterable[StreamMode],
        adapter: Adapter,
        delivery: Delivery,
        store: StorageEngine,
        refusals: StreamRefusals,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._target = target
        self._modes = list(modes)
        if not self._modes:
            raise ValueError("a reply stream needs at least one way to show the reply")
        self._adapter = adapter
        self._delivery = delivery
        self._store = store
        self._refusals = refusals
        self._metrics = metrics
        self._clock = clock
        self._budget = delivery.budget
        self._interval = self._budget.stream_interval(target.platform)
        self._surface = self._make(self._modes.pop(0))
        self._text = ""
        self._tools: list[str] = []
        self._working = False
        """Tools run now: the tool line is shown instead of the text."""
        self._first_text_at: float | None = None
        self._started = clock()
        self._first_shown_at: float | None = None
        self._shown: tuple[bool, str] | None = None
        """What was shown last: (tool line?, its text)."""
        self._next_at = 0.0
        self._failures = 0
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._idle = True
        """The worker only waits (for text, its interval or the budget): safe to cancel."""
        self._stopping = False
        self._ended = False
        self._given_up = False

    @property
    def mode(self) -> StreamMode:
        return self._surface.mode

    # --- fed by the turn -----------------------------------------------------------------------

    def text(self, text_so_far: str) -> None:
        """The model's text so far (the latest wins; a new model call starts again from "")."""
        if self._stopping:
            return
        self._text = text_so_far
        if text_so_far.strip():
            self._working = False
            if self._first_text_at is None:
                self._first_text_at = self._clock()
        self._poke()

    def tools(self, names: Iterable[str]) -> None:
        """The agent calls these tools now (their labels): the reply shows the tool line until the model writes again."""
        if self._stopping:
            return
        self._tools.extend(names)
        self._working = True
        self._text = ""
        self._poke()

    def _poke(self) -> None:
        if self._given_up:
            return
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name=f"stream:{self._target.turn_id}")
        self._wake.set()

    # --- ended by the turn ---------------------------------------------------------------------

    async def stop(self) -> None:
        """No more updates: returns once the update in flight is shown and recorded, and a native
        stream is ended. Call before the turn's answer is committed."""
        self._stopping = True
        worker = self._worker
        if worker is not None:
            if self._idle:
                worker.cancel()
            self._wake.set()
            try:
                await asyncio.shield(worker)
            except asyncio.CancelledError:
                if not worker.done():
                    worker.cancel()  # we were cancelled ourselves: do not leave the worker behind
                    raise
        if self._ended:
            return
        self._ended = True
        try:
            await self._end_surface()
        except (AdapterError, DeliveryError) as error:
            log.warning("stream.end_failed", platform=self._target.platform, mode=self.mode.value, error=str(error))
        log.info(
            "stream.finished", platform=self._target.platform, mode=self.mode.value, updates=self._surface.updates,
            ms_first=None if self._first_shown_at is None else round((self._first_shown_at - self._started) * 1000),
        )  # fmt: skip

    async def _end_surface(self) -> None:
        """End the surface. A native stream's stop is a write like a send: it takes the chat's budget, and
        a 429 is waited out and the stop tried again, so the answer's edit finds the stream ended."""
        target = self._target
        for attempt in range(1, MAX_FAILURES + 1):
            writing = self._surface.ends_with_a_write
            try:
                async with self._budget.write(target.platform, target.chat_id) if writing else contextlib.nullcontext():
                    if writing and not self._delivery.may_send():
                        return
                    await self._surface.end()
                return
            except RateLimited as error:
                self._budget.hold(target.platform, target.chat_id, error.retry_after)
                if attempt == MAX_FAILURES:
                    raise
                log.warning("stream.rate_limited", platform=target.platform, chat=target.chat_id, mode=self.mode.value,
                            retry_after=error.retry_after, ending=True)  # fmt: skip

    async def stopped(self, mark: str) -> None:
        """The turn was stopped (``/stop``, an interrupt): the message shown ends with ``mark``, through the
        outbox (delivered now, or after a crash on the next start). Best effort: never raises."""
        try:
            await self.stop()
            if self._delivery.may_send():  # else the row stays live: its turn runs again on another replica
                await self._surface.close(mark)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a stopped turn's mark never fails anything
            log.warning("stream.close_failed", platform=self._target.platform, mode=self.mode.value, error=str(error))

    # --- the worker ----------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not self._stopping:
                await self._wake.wait()
                if self._stopping:
                    return
                await self._pace()
                if self._stopping:
                    return
                self._wake.clear()
                wanted = self._wanted()
                if wanted is None or wanted == self._shown:
                    continue
                self._idle = False
                try:
                    await self._update(*wanted)
                finally:
                    self._idle = True
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        except Exception as error:  # noqa: BLE001 - streaming never fails the turn
            log.warning("stream.failed", platform=self._target.platform, mode=self.mode.value,
                        error=f"{type(error).__name__}: {error}", exc_info=error)  # fmt: skip
            self._given_up = True

    def _wanted(self) -> tuple[bool, str] | None:
        """What to show now: the tool line, or the whole words of the text; None: nothing yet."""
        if self._working:
            return (True, working_line(self._tools))
        text = whole_words(redactor.credentials(self._text))
        if not text.strip():
            return None
        return (False, text)

    async def _pace(self) -> None:
        """Wait for the stream's interval, the chat's budget and, before the first message, enough text."""
        while not self._stopping:
            now = self._clock()
            delay = max(self._next_at - now, self._budget_wait(self._working))
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            wait_first = self._first_wait(now)
            if wait_first <= 0:
                return
            self._wake.clear()
            try:  # woken by more text (a sentence may be complete now), or after the rest of the second
                await asyncio.wait_for(self._wake.wait(), wait_first)
            except TimeoutError:
                pass
            self._wake.set()

    def _budget_for(self, tool_line: bool) -> str | None:
        """Which budget the next update spends: a send or an edit ("write"), an append to the platform's
        own stream ("append", a rate of its own), or none (a native stream's status line)."""
        if self.mode is not StreamMode.NATIVE:
            return "write"
        if tool_line:
            return None
        assert isinstance(self._surface, RecordedSurface)
        return "write" if self._surface.message_id is None else "append"  # no message yet: the stream's start

    def _budget_wait(self, tool_line: bool) -> float:
        """Seconds until the next update's budget has room."""
        target = self._target
        budget = self._budget_for(tool_line)
        if budget == "append":
            return self._budget.append_available_in(target.platform, target.chat_id)
        return self._budget.available_in(target.platform, target.chat_id) if budget else 0.0

    def _first_wait(self, now: float) -> float:
        """Seconds the first message still waits for text (0: it may go)."""
        if self._shown is not None or self._working or self.mode is StreamMode.DRAFT or self._first_text_at is None:
            return 0.0
        if isinstance(self._surface, RecordedSurface) and self._surface.message_id is not None:
            return 0.0  # a message a crashed run left: it is edited as soon as there is text
        if _SENTENCE.search(whole_words(self._text)):
            return 0.0
        return max(0.0, self._first_text_at + FIRST_AFTER - now)

    async def _update(self, tool_line: bool, content: str) -> None:
        target = self._target
        budget = self._budget_for(tool_line)
        spending = (
            self._budget.write(target.platform, target.chat_id, append=budget == "append")
            if budget in ("write", "append") else contextlib.nullcontext()
        )  # fmt: skip
        try:
            async with spending:
                if not self._delivery.may_send():  # asked last, after the wait for the budget
                    self._given_up = self._stopping = True  # another replica answers the turn's messages
                    return
                if tool_line:
                    await self._surface.show_tools(content)
                else:
                    await self._surface.show(content)
        except StreamingUnsupported as error:
            self._fall_back(str(error))
            self._wake.set()
            return
        except NotExtending:
            self._go_on_editing()
            self._wake.set()
            return
        except RateLimited as error:
            self._budget.hold(target.platform, target.chat_id, error.retry_after)
            self._interval = min(MAX_INTERVAL, self._interval * 2)
            self._wake.set()  # the latest text, once the hold is over
            log.warning("stream.rate_limited", platform=target.platform, chat=target.chat_id, mode=self.mode.value,
                        retry_after=error.retry_after, interval=self._interval)  # fmt: skip
            return
        except DeliveryError as error:
            self._failures += 1
            self._next_at = self._clock() + self._interval
            log.warning("stream.update_failed", platform=target.platform, chat=target.chat_id, mode=self.mode.value,
                        error=str(error), failures=self._failures)  # fmt: skip
            if self._failures >= MAX_FAILURES:
                self._given_up = True
                self._stopping = True
            else:
                self._wake.set()
            return
        self._failures = 0
        if self._shown is None:
            log.info("stream.started", platform=target.platform, mode=self.mode.value)
        if self._first_shown_at is None and not tool_line:
            self._first_shown_at = self._clock()
        self._shown = (tool_line, content)
        self._next_at = self._clock() + self._interval
        self._metrics.stream_updates.inc(target.platform, self.mode.value)

    # --- changing the way ------------------------------------------------------------------------

    def _make(self, mode: StreamMode, previous: Surface | None = None) -> Surface:
        """The surface for ``mode``; one that follows another shows the same message (if any) from here on."""
        surface = _SURFACES[mode](self._target, self._adapter, self._delivery, self._store)
        if previous is not None:
            surface.updates = previous.updates
            if isinstance(surface, RecordedSurface) and isinstance(previous, RecordedSurface):
                surface.take_over(previous)
        return surface

    def _fall_back(self, reason: str) -> None:
        """The platform refused this way for the chat: remember it and take the next one (or show nothing)."""
        refused = self.mode
        self._refusals.refuse(self._target.platform, self._target.chat_type, refused)
        if not self._modes:
            log.warning("stream.fallback", platform=self._target.platform, **{"from": refused.value}, to="none",
                        reason=reason)  # fmt: skip
            self._given_up = True
            self._stopping = True
            return
        following = self._modes.pop(0)
        log.warning("stream.fallback", platform=self._target.platform, **{"from": refused.value}, to=following.value,
                    reason=reason)  # fmt: skip
        self._surface = self._make(following, self._surface)
        self._shown = None

    def _go_on_editing(self) -> None:
        """A native stream whose text no longer extends: the same message, edited from now on."""
        log.info("stream.fallback", platform=self._target.platform, **{"from": StreamMode.NATIVE.value},
                 to=StreamMode.EDIT.value, reason="the text no longer extends what was streamed")  # fmt: skip
        self._surface = self._make(StreamMode.EDIT, self._surface)
