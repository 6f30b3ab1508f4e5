"""Long polling with our own getUpdates loop, and a watchdog that notices when it goes deaf.

The offset moves past an update only after the gateway's intake has stored
it, so a crash at any point leaves Telegram holding every update not yet in
the inbox (it sends them again; the inbox drops repeats). Nothing is dropped
at start: updates that arrived while the gateway was down are answered. Each
update of a batch is read on its own (:mod:`.updates`): one that cannot be
read is logged as ``telegram.update.rejected`` and passed over, so it neither
blocks the rest of its batch nor comes back; an update that could not be
stored (the database is down) is fetched again, with a growing pause.
A press of one of the bot's buttons (a ``callback_query``) is stored nowhere: it
is acknowledged and handed to the gateway on the spot (:mod:`.buttons`).

Liveness is "a getUpdates call came back recently", not "the task exists".
When none has for ``stall_timeout`` seconds (a hung connection, a dead
network, a proxy swallowing long requests), the watchdog throws away the
connection and starts polling again on a new one, with growing pauses, and
the adapter's status says so. A 409 Conflict (another process polls the same
token) is reported as such and retried slowly instead of in a tight loop.

Recovery shows at once: while polling is not known to work (at start, after an
error, a stall or a 409), getUpdates is asked not to wait for news (timeout 0),
so the first request Telegram answers marks the adapter running again, instead
of a long poll that would keep /health degraded for up to ``poll_timeout``
seconds after Telegram is back. Long polling resumes with the next request.

Held with an :class:`~adapters.contract.Ownership` (several gateways share the bot token, and this one
holds the poller's lease), the poller asks ``ownership.held()`` before every getUpdates and before
handing each update over, and ends at once when it says False (``telegram.polling.fenced``): a
process frozen past its lease's expiry neither polls (which would cut off the new holder's long
poll) nor stores what it had fetched. After each batch is handed over, the offset is recorded with
the lease (``ownership.record``), and a new holder starts from it.

A connection can also answer every getUpdates promptly and still hear nothing
(Telegram holds updates it does not hand over): only a probe that compares
getWebhookInfo's pending count with what the poller fetched notices that (see
:mod:`.liveness`). :meth:`Poller.restart` then replaces the connection the same
way a stall does, and the adapter stays DEGRADED until updates flow again: a
batch arrives, or Telegram holds nothing beyond what the poller has in hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiogram import Bot
from aiogram.exceptions import ClientDecodeError, TelegramAPIError, TelegramConflictError, TelegramUnauthorizedError
from aiogram.methods import GetWebhookInfo
from tenacity import RetryCallState, wait_exponential

from adapters.contract import AdapterState, Intake, Ownership

from .buttons import is_press
from .convert import BotIdentity
from .updates import RawGetUpdates, read_update, update_id_of

log = structlog.get_logger(__name__)

ALLOWED_UPDATES = ["message", "callback_query"]
"""New messages and presses of the bot's buttons; edits and other update kinds are not asked for."""

Report = Callable[[AdapterState, str], None]
PressHandler = Callable[[Any, Bot], Awaitable[None]]
"""Takes a raw ``callback_query`` update and the bot that fetched it (:meth:`.buttons.Presses.handle`)."""


class Fenced(Exception):
    """This process no longer holds the poller's lease: polling ends here."""


@dataclass(frozen=True, slots=True)
class PollingSettings:
    poll_timeout: int = 30
    """Seconds one getUpdates waits for news before coming back empty."""
    stall_timeout: float = 120.0
    """Seconds without a getUpdates coming back before the connection is replaced."""
    retry_base: float = 1.0
    retry_max: float = 60.0
    conflict_retry: float = 30.0
    """Pause between attempts while another process polls the same token."""

    def backoff(self, attempt: int) -> float:
        """Growing pause for the ``attempt``-th failure in a row, with jitter so restarts spread out."""
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = max(attempt, 1)
        delay = wait_exponential(multiplier=self.retry_base, max=self.retry_max)(state)
        return round(delay * random.uniform(0.75, 1.0), 2)


class Poller:
    def __init__(
        self,
        make_bot: Callable[[], Bot],
        identity: BotIdentity,
        intake: Intake,
        report: Report,
        on_inbound: Callable[[], None],
        settings: PollingSettings,
        ownership: Ownership | None = None,
        on_press: PressHandler | None = None,
    ) -> None:
        """``on_press``: handles a press of one of the bot's buttons (acknowledged, never stored); without
        one, presses are passed over."""
        self._make_bot = make_bot
        self._on_press = on_press
        self._ownership = ownership
        self._identity = identity
        self._intake = intake
        self._report = report
        self._on_inbound = on_inbound
        self.settings = settings
        self.offset: int | None = _stored_offset(ownership)
        """The next update id wanted; every id below it is in the gateway's inbox."""
        self._recorded = self.offset
        """The offset last recorded with the lease."""
        self._confirmed: int | None = None
        """The offset Telegram last saw (updates below it will not come again)."""
        self._last_success = time.monotonic()
        self._last_error = ""
        self._failures = 0
        self._store_failures = 0
        """Updates the intake could not store in a row (the first failure's line carries the traceback)."""
        self._restarts = 0
        self._conflict = False
        self._healthy = False
        self._task: asyncio.Task[None] | None = None
        self.received = 0
        """Updates getUpdates has returned so far (a liveness probe watches it move)."""
        self._held: set[int] = set()
        """Ids of updates fetched whose confirmation Telegram has not seen yet: it still counts them as pending."""
        self._restart = asyncio.Event()
        self._restart_reason = ""
        self._awaiting_flow = False
        """After a requested restart: DEGRADED until updates are seen to flow."""

    @property
    def held(self) -> int:
        """How many of the updates Telegram counts as pending this poller has fetched already."""
        return len(self._held)

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="telegram-polling")

    async def stop(self) -> None:
        """Stop polling and tell Telegram which updates are done, so a restart does not fetch them again."""
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Fenced):
            await task
        if self.offset is None or not self._holds():
            return
        if self.offset != self._confirmed:
            await self._confirm(self.offset)
        with contextlib.suppress(Fenced):
            await self._record()

    def restart(self, reason: str) -> None:
        """Replace the connection now (a probe found it deaf): DEGRADED with ``reason`` until updates flow."""
        self._restart_reason = reason
        self._awaiting_flow = True
        self._report(AdapterState.DEGRADED, f"{reason}; restarting polling on a new connection")
        self._restart.set()

    # --- supervision -------------------------------------------------------------------------
    async def _supervise(self) -> None:
        while True:
            bot = self._make_bot()
            self._last_success = time.monotonic()
            poll = asyncio.create_task(self._poll(bot), name="telegram-getupdates")
            try:
                requested = await self._watch(poll)
            except Fenced:
                lease = self._ownership.lease if self._ownership is not None else None
                log.warning("telegram.polling.fenced", lease=lease, offset=self.offset,
                            hint="this gateway no longer holds the poller's lease; another one polls")  # fmt: skip
                self._report(AdapterState.RUNNING, "sending only: another gateway receives (polls) for this bot")
                return
            finally:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll
                await bot.session.close()
            if requested:
                self._restart.clear()
                self._healthy = False  # the first request on the new connection does not wait for news
                log.warning("telegram.polling.restarted", reason=self._restart_reason,
                            hint="polling continues on a new connection; health says degraded until updates flow")  # fmt: skip
                self._report(AdapterState.DEGRADED, f"{self._restart_reason}; polling restarted on a new connection, "
                             "waiting for updates to flow")  # fmt: skip
                continue
            self._restarts += 1
            silent = time.monotonic() - self._last_success
            delay = self.settings.backoff(self._restarts)
            last_error = f" (last error: {self._last_error})" if self._last_error else ""
            log.warning("telegram.polling.stalled", silent_s=round(silent, 1), restarts=self._restarts,
                        retry_in_s=delay, last_error=self._last_error or None,
                        hint="no getUpdates answer in time; polling restarts on a new connection")  # fmt: skip
            self._healthy = False
            self._report(
                AdapterState.DEGRADED,
                f"getUpdates made no progress for {silent:.0f} s{last_error}; polling restarted on a new "
                f"connection ({self._restarts} time(s)), next attempt in {delay:g} s",
            )
            await asyncio.sleep(delay)

    async def _watch(self, poll: asyncio.Task[None]) -> bool:
        """Return when polling has made no progress for too long (False; a 409 is handled by the loop itself)
        or a restart was asked for (True)."""
        every = min(1.0, self.settings.stall_timeout / 4)
        asked = asyncio.create_task(self._restart.wait(), name="telegram-restart-request")
        try:
            while True:
                await asyncio.wait({poll, asked}, timeout=every, return_when=asyncio.FIRST_COMPLETED)
                if poll.done():
                    poll.result()
                    raise RuntimeError("the polling loop ended by itself")
                if asked.done():
                    return True
                if not self._conflict and time.monotonic() - self._last_success > self.settings.stall_timeout:
                    return False
        finally:
            asked.cancel()

    # --- the loop ----------------------------------------------------------------------------
    async def _poll(self, bot: Bot) -> None:
        while True:
            updates = await self._get_updates(bot)
            if updates is None:
                continue
            for raw in updates:
                update_id = update_id_of(raw)
                self._check_held()
                if not await self._hand_over(raw, update_id, bot):
                    break
                if update_id is not None:
                    self.offset = update_id + 1
            await self._record()

    def _holds(self) -> bool:
        return self._ownership is None or self._ownership.held()

    def _check_held(self) -> None:
        if not self._holds():
            raise Fenced

    async def _record(self) -> None:
        """Record the offset with the lease (for the next holder), when it moved; Fenced when the lease moved on."""
        if self._ownership is None or self.offset is None or self.offset == self._recorded:
            return
        self._check_held()
        if not await self._ownership.record(str(self.offset)):
            raise Fenced
        self._recorded = self.offset

    async def _get_updates(self, bot: Bot) -> list[Any] | None:
        timeout = self.settings.poll_timeout if self._healthy else 0  # until one works, ask without waiting
        offset = self.offset
        method = RawGetUpdates(offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES)
        self._check_held()
        try:
            updates = await bot(method, request_timeout=timeout + 15)
        except TelegramConflictError as error:
            await self._on_conflict(error)
            return None
        except TelegramUnauthorizedError as error:
            await self._on_failure(error, AdapterState.FAILED, "Telegram rejected the bot token (401 Unauthorized); "
                                   "set a valid token from @BotFather and restart")  # fmt: skip
            return None
        except (TelegramAPIError, ClientDecodeError) as error:
            await self._on_failure(error, AdapterState.DEGRADED, f"getUpdates failed: {error}")
            return None
        self._fetched(offset, updates)
        if self._awaiting_flow:
            await self._check_flow(bot, updates)
        else:
            self._on_progress()
        return updates

    def _fetched(self, offset: int | None, updates: list[Any]) -> None:
        """Telegram has seen ``offset`` (every update below it is done) and handed over ``updates``."""
        self._last_success = time.monotonic()
        self._confirmed = offset
        ids = {update_id for update_id in map(update_id_of, updates) if update_id is not None}
        self._held = {held for held in self._held if offset is None or held >= offset} | ids
        self.received += len(updates)

    async def _check_flow(self, bot: Bot, updates: list[Any]) -> None:
        """After a requested restart: RUNNING once a batch arrives or Telegram holds nothing beyond what was
        fetched; until then DEGRADED, long polling (no busy loop), asking getWebhookInfo after each empty answer."""
        waiting = 0 if updates else await self._waiting_beyond_held(bot)
        self._healthy = True
        if waiting != 0:
            count = "an unknown number of" if waiting is None else str(waiting)
            self._report(AdapterState.DEGRADED, f"{self._restart_reason}; polling restarted on a new connection, but "
                         f"getUpdates still returns nothing while Telegram holds {count} update(s)")  # fmt: skip
            return
        self._awaiting_flow = False
        self._failures = self._restarts = 0
        self._conflict, self._last_error = False, ""
        log.info("telegram.polling.flowing", after=self._restart_reason, fetched=len(updates))
        self._report(AdapterState.RUNNING, f"long polling (getUpdates timeout {self.settings.poll_timeout} s)")

    async def _waiting_beyond_held(self, bot: Bot) -> int | None:
        """Updates Telegram holds that this poller has not fetched; None when getWebhookInfo failed."""
        try:
            info = await bot(GetWebhookInfo(), request_timeout=15)
        except (TelegramAPIError, ClientDecodeError) as error:
            log.warning("telegram.polling.flow_check_failed", error=str(error))
            return None
        return max(info.pending_update_count - self.held, 0)

    async def _hand_over(self, raw: Any, update_id: int | None, bot: Bot) -> bool:
        """Give one raw update to the intake; True once it is stored (or needs no storing, or cannot be read)."""
        if is_press(raw):  # an answer to a question the gateway asked: handled now, nothing to store
            if self._on_press is not None:
                await self._on_press(raw, bot)
            return True
        message = read_update(raw, bot, self._identity)
        if message is None:
            log.debug("telegram.update.skipped", update_id=update_id)
            return True
        try:
            await self._intake(message)
        except Exception as error:  # noqa: BLE001 - the update stays unconfirmed and is fetched again
            # A full disk fails every attempt: the pause grows to retry_max (a getUpdates answered in between
            # does not reset it), and only the first line carries the traceback.
            self._failures += 1
            self._store_failures += 1
            delay = self.settings.backoff(self._store_failures)
            trace = {"exc_info": error} if self._store_failures == 1 else {"attempt": self._store_failures}
            log.error("telegram.intake.failed", update_id=update_id, error=str(error), retry_in_s=delay, **trace)
            self._healthy = False
            self._report(AdapterState.DEGRADED, f"could not store incoming update {update_id} ({error}); "
                         f"retrying in {delay:g} s")  # fmt: skip
            await asyncio.sleep(delay)
            return False
        self._store_failures = 0
        self._on_inbound()
        return True

    # --- outcomes ----------------------------------------------------------------------------
    def _on_progress(self) -> None:
        if self._healthy:
            return
        if self._failures or self._restarts or self._conflict:
            log.info("telegram.polling.recovered", failures=self._failures, restarts=self._restarts,
                     after_conflict=self._conflict)  # fmt: skip
        self._failures = self._restarts = 0
        self._conflict, self._healthy, self._last_error = False, True, ""
        self._report(AdapterState.RUNNING, f"long polling (getUpdates timeout {self.settings.poll_timeout} s)")

    async def _on_conflict(self, error: TelegramConflictError) -> None:
        delay = self.settings.conflict_retry
        if "webhook" in error.message.lower():
            detail = ("Telegram refuses getUpdates because a webhook is set for this bot token (409 Conflict): "
                      "another instance runs in webhook mode; stop it or switch this one to mode: webhook")  # fmt: skip
        else:
            detail = ("another process is polling this bot token (409 Conflict from getUpdates): stop the other "
                      "instance (or give it its own bot token); only one poller per token receives messages")  # fmt: skip
        log.error("telegram.polling.conflict", telegram=error.message, retry_in_s=delay, hint=detail)
        self._conflict, self._healthy, self._last_error = True, False, error.message
        self._report(AdapterState.FAILED, f"{detail}; retrying every {delay:g} s")
        await asyncio.sleep(delay)

    async def _on_failure(self, error: Exception, state: AdapterState, detail: str) -> None:
        self._failures += 1
        delay = self.settings.retry_max if state is AdapterState.FAILED else self.settings.backoff(self._failures)
        self._last_error = str(error)
        log.warning("telegram.polling.error", error=str(error), failures=self._failures, retry_in_s=delay)
        self._healthy = False
        self._report(state, f"{detail}; retrying in {delay:g} s")
        await asyncio.sleep(delay)

    async def _confirm(self, offset: int) -> None:
        """Tell Telegram every update below ``offset`` is done (a getUpdates that asks for one, without waiting)."""
        bot = self._make_bot()
        try:
            await asyncio.wait_for(bot(RawGetUpdates(offset=offset, timeout=0, limit=1), request_timeout=5), 6)
            self._confirmed = offset
        except (TelegramAPIError, ClientDecodeError, TimeoutError) as error:
            log.debug("telegram.polling.confirm_failed", offset=offset, error=str(error))
        finally:
            await bot.session.close()


def _stored_offset(ownership: Ownership | None) -> int | None:
    """The offset the previous holder of the lease recorded, if any and readable."""
    progress = None if ownership is None else ownership.progress
    if progress is None:
        return None
    try:
        return int(progress)
    except ValueError:
        log.warning("telegram.polling.progress_unreadable", progress=progress[:40],
                    hint="polling starts from what Telegram still holds; the inbox drops repeats")  # fmt: skip
        return None
