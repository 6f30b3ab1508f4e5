"""Tool progress: one message per turn that says what the agent is doing, edited as it goes.

Nothing is shown until the first tool call of a turn (a plain question and
answer sends nothing extra). Then one message goes out ("Working on it:
searching past conversations…") and is edited as more tools are called (a tool
server's tool by its label, server and tool's own name: "using
github.search_issues"); edits
are throttled to one per ``interval`` seconds per turn, and calls arriving in
between are coalesced into the next edit. When the turn ends, the message is
edited one last time to a short summary of the tools used (the adapter
interface has no delete). Everything goes through :class:`~gateway.delivery.outbox.Delivery`,
so the message and its edits are recorded in the outbox like any reply.

Progress is best effort: a failure to send or edit it is logged and never
fails the turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import structlog

from gateway.delivery.outbox import Delivery
from gateway.delivery.policy import PROGRESS_PREFIX
from storage import OutboxRecord

log = structlog.get_logger("gateway.progress")

EDIT_INTERVAL: Final = 1.5
"""Seconds between two edits of one turn's progress message."""

MAX_PHRASES: Final = 6
"""Phrases shown at most; further distinct tools are counted ("and 2 more")."""

PHRASES: Final[dict[str, str]] = {
    "session_search": "searching past conversations",
    "memory": "updating my notes",
}


def phrase(tool: str) -> str:
    return PHRASES.get(tool, f"using {tool}")


def working_line(tools: Iterable[str]) -> str:
    """The text while the turn runs: what was done so far, most recent last."""
    phrases = list(dict.fromkeys(phrase(t) for t in tools))
    shown = phrases[:MAX_PHRASES]
    more = len(phrases) - len(shown)
    return "Working on it: " + ", ".join(shown) + (f" and {more} more" if more else "") + "…"


def final_line(tools: Iterable[str]) -> str:
    """The text left behind once the turn is done."""
    return "Used: " + ", ".join(dict.fromkeys(tools))


class ToolProgress:
    """The progress message of one turn. ``note`` as tools are called, then ``stop`` and ``finish``."""

    def __init__(
        self,
        delivery: Delivery,
        *,
        turn_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._delivery = delivery
        self._turn_id = f"{PROGRESS_PREFIX}{turn_id}"
        self._platform = platform
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._interval = EDIT_INTERVAL if interval is None else interval
        self._clock = clock
        self._sleep = sleep
        self._tools: list[str] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._throttled = False
        """True while the worker only waits out the interval (safe to cancel)."""
        self._stopping = False
        self._row: OutboxRecord | None = None
        self._shown: str | None = None
        self._last_change = 0.0

    @property
    def started(self) -> bool:
        return self._worker is not None

    @property
    def shown(self) -> str | None:
        """The text the progress message shows (as last sent or edited), None before it is out."""
        return self._shown

    def note(self, tools: Iterable[str]) -> None:
        """Tools the agent is calling now. The first call starts the message; later ones update it."""
        self._tools.extend(tools)
        if not self._tools or self._stopping:
            return
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name=self._turn_id)
        self._wake.set()

    async def stop(self) -> None:
        """No more intermediate edits; returns once the message (if any) is out. Call before the reply."""
        self._stopping = True
        worker = self._worker
        if worker is None:
            return
        if self._throttled:
            worker.cancel()  # only waiting for the next edit slot: that edit is superseded by the final line
        self._wake.set()
        try:
            await asyncio.shield(worker)
        except asyncio.CancelledError:
            if not worker.cancelled():
                worker.cancel()  # we were cancelled ourselves (/stop): do not leave the worker behind
                raise
        except Exception as error:  # noqa: BLE001 - progress never fails the turn
            log.warning("progress.failed", error=str(error))

    async def finish(self, *, stopped: bool = False, failed: bool = False) -> None:
        """Edit the message to its final line (after ``stop``), honouring the edit interval."""
        if self._row is None:
            return
        text = ("Stopped. " if stopped else "Failed. " if failed else "") + final_line(self._tools)
        if text == self._shown:
            return
        await self._wait_turn()
        await self._edit(text)

    async def _run(self) -> None:
        try:
            self._wake.clear()
            text = working_line(self._tools)
            rows = await self._delivery.send_text_rows(
                turn_id=self._turn_id, platform=self._platform, chat_id=self._chat_id, thread_id=self._thread_id,
                text=text,
            )  # fmt: skip
        except Exception as error:  # noqa: BLE001 - progress never fails the turn
            log.warning("progress.send_failed", error=str(error))
            return
        if not rows or rows[0][1] is None:
            return  # not delivered: nothing to edit later
        self._row = rows[0][0]
        self._shown = text
        self._last_change = self._clock()
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            self._throttled = True
            try:
                await self._wait_turn()
            finally:
                self._throttled = False
            if self._stopping:
                return
            self._wake.clear()  # what arrived during the wait is in this edit
            await self._edit(working_line(self._tools))

    async def _wait_turn(self) -> None:
        delay = self._last_change + self._interval - self._clock()
        if delay > 0:
            await self._sleep(delay)

    async def _edit(self, text: str) -> None:
        if self._row is None or text == self._shown:
            return
        try:
            await self._delivery.edit_text(self._row, text)
        except Exception as error:  # noqa: BLE001 - progress never fails the turn
            log.warning("progress.edit_failed", error=str(error))
        self._shown = text
        self._last_change = self._clock()
