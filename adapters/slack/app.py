"""The slack-bolt AsyncApp and what its listeners do with an event.

Acknowledgement: the app runs with ``process_before_response=True``, so Bolt
acknowledges an event (HTTP 200, or the Socket Mode ack) only after the
listener returned. The listener converts the event and awaits the gateway's
intake, which returns once the message is durably in the inbox; that write is
fast, so Slack gets its ack well within its 3 seconds and the turn itself runs
later on the gateway's lanes. Should intake take longer than
:data:`ACK_BUDGET` (a slow disk, a gateway still starting), the event is
acknowledged anyway and intake finishes in a tracked task. If intake fails,
the event is not acknowledged and Slack delivers it again; a redelivery that
was already stored is recognised in the gateway inbox by the message's id
(``{channel}:{ts}``, see :mod:`adapters.slack.convert`) and never answered
twice, and neither is the second copy of a mention in a thread.

A channel thread reply without a mention (:class:`ThreadReply`) first needs
the answer of :class:`ThreadMemory` (the bot takes part in the thread?), which
may ask Slack; that lookup counts against the same budget as intake.

An event that cannot be converted (see :class:`adapters.slack.convert.Malformed`)
is logged as ``slack.event.rejected`` with its ids and the reason, never its
text, and acknowledged: Slack would send it again and again otherwise.

Before intake, the sender's display name is filled in from
:class:`UserNames` (``users.info``, cached); that wait is bounded by the
cache's own lookup timeout, also inside the ack budget, and a missing name
only leaves ``user_name`` empty.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import ChatType, InboundMessage, Intake, log_rejected
from adapters.slack.buttons import PressSink
from adapters.slack.convert import Skip, ThreadReply, to_inbound
from adapters.slack.identity import BotIdentity
from adapters.slack.liveness import RecentIds
from adapters.slack.threads import ThreadMemory
from adapters.slack.users import UserNames
from adapters.slack.workspaces import Workspaces

log = structlog.get_logger(__name__)

ACK_BUDGET: Final = 2.0
"""Seconds an event may wait for intake before it is acknowledged regardless (Slack allows 3)."""


class EventSink:
    """Bolt's listener for every event: convert, hand to intake, decide the ack."""

    def __init__(
        self,
        bot: BotIdentity,
        threads: ThreadMemory,
        names: UserNames,
        on_accepted: Callable[[], None],
        *,
        workspaces: Workspaces,
        every_message: bool = False,
    ) -> None:
        self._bot = bot
        self._workspaces = workspaces
        self._every_message = every_message
        self._threads = threads
        self._names = names
        self._on_accepted = on_accepted
        self._intake: Intake | None = None
        self._late: set[asyncio.Task[bool]] = set()
        self.received = RecentIds()
        """The ids of the messages events brought lately, for the liveness probe (:mod:`.liveness`)."""

    def open(self, intake: Intake) -> None:
        self._intake = intake

    def close(self) -> None:
        """Refuse new events (unacknowledged, so Slack delivers them again later)."""
        self._intake = None

    async def drain(self) -> None:
        """Wait for intake calls that outlived their ack budget."""
        if self._late:
            await asyncio.gather(*self._late, return_exceptions=True)

    async def __call__(self, body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
        fields = _fields(body, request.headers)
        try:
            result = to_inbound(body, self._bot, every_message=self._every_message)
        except Exception as error:  # noqa: BLE001 - acknowledged: Slack sending it again would fail the same way
            log_rejected(log, "slack.event.rejected", error, **fields)
            return None
        if isinstance(result, Skip):
            log.debug("slack.event.ignored", reason=result.reason, **fields)
            return None
        self.received.add((result.message if isinstance(result, ThreadReply) else result).event_id)
        if (refusal := self._workspaces.refusal(body)) is not None:
            (log.warning if refusal.other_installation else log.info)(
                "slack.event.rejected", reason=refusal.reason, **refusal.teams, **fields
            )
            return None  # acknowledged: Slack must not deliver it again
        self._workspaces.note_sender(body)  # whose team a reply streamed to them names
        intake = self._intake
        if intake is None:
            log.info("slack.event.refused", reason="intake is stopped; Slack delivers it again", **fields)
            return BoltResponse(status=503, body="shutting down")
        if fields.get("retry_num"):
            log.info("slack.event.redelivered", **fields)
        if isinstance(result, ThreadReply):
            if result.mentions_bot and not self._threads.known(*result.thread):
                # Its app_mention copy starts the turn and makes the thread known; no lookup needed.
                log.debug("slack.event.ignored", reason="mention copy of an app_mention", **fields)
                return None
            return await self._hand_over(self._thread_reply(intake, result, fields), result.message, fields)
        if result.mentioned and result.thread_id and not result.from_bot and result.chat_type is not ChatType.DM:
            self._threads.remember(result.chat_id, result.thread_id)
        return await self._hand_over(self._accept(intake, result), result, fields)

    async def _accept(self, intake: Intake, message: InboundMessage) -> bool:
        await intake(await self._names.named(message))
        return True

    async def _thread_reply(self, intake: Intake, reply: ThreadReply, fields: dict[str, str]) -> bool:
        if not await self._threads.takes_part(*reply.thread):
            log.debug("slack.event.ignored", reason="reply in a thread the bot takes no part in", **fields)
            return False
        await intake(await self._names.named(reply.message))
        return True

    async def _hand_over(
        self, work: Coroutine[Any, Any, bool], message: InboundMessage, fields: dict[str, str]
    ) -> BoltResponse | None:
        task = asyncio.create_task(work, name=f"slack-intake:{message.event_id}")
        done, _ = await asyncio.wait({task}, timeout=ACK_BUDGET)
        if task not in done:
            log.warning("slack.event.ack_before_intake", budget_s=ACK_BUDGET,
                        reason="intake is slow; acknowledged so Slack does not redeliver", **fields)  # fmt: skip
            self._late.add(task)
            task.add_done_callback(self._late_done)
            return None
        error = task.exception()
        if error is not None:
            log.error("slack.intake.failed", error=str(error), hint="not acknowledged: Slack delivers it again",
                      exc_info=error, **fields)  # fmt: skip
            return BoltResponse(status=500, body="intake failed")
        if task.result():
            self._on_accepted()
        return None

    def _late_done(self, task: asyncio.Task[bool]) -> None:
        self._late.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("slack.intake.failed", error=str(error), task=task.get_name(),
                      hint="already acknowledged: this event is lost unless the sender repeats it")  # fmt: skip
        elif task.result():
            self._on_accepted()


def build_app(
    client: AsyncWebClient, signing_secret: str, bot: BotIdentity, sink: EventSink, presses: PressSink
) -> AsyncApp:
    """An AsyncApp whose every event goes to ``sink`` and every button press to ``presses``; request verification
    stays on."""

    async def authorize() -> AuthorizeResult:
        # The identity comes from auth.test at start, so no event waits for a lazy auth.test call.
        return AuthorizeResult(
            enterprise_id=bot.enterprise_id, team_id=bot.team_id, bot_user_id=bot.user_id, bot_id=bot.bot_id,
            bot_token=client.token,
        )  # fmt: skip

    # Bolt gets a token-less twin of the client: with ``authorize`` set, a token on the client only
    # earns a warning, and the token reaches each request through the AuthorizeResult instead.
    bolt_client = AsyncWebClient(
        base_url=client.base_url, timeout=client.timeout, session=client.session, retry_handlers=client.retry_handlers
    )
    app = AsyncApp(
        client=bolt_client,
        signing_secret=signing_secret,
        authorize=authorize,
        process_before_response=True,
        request_verification_enabled=True,
    )

    async def on_event(body: dict[str, Any], request: AsyncBoltRequest) -> BoltResponse | None:
        return await sink(body, request)

    app.event("app_mention")(on_event)
    app.event("message")(on_event)
    # Anything else the app is subscribed to is acknowledged and skipped, so Slack does not retry it.
    app.event(re.compile(".*"))(on_event)
    # Presses of buttons the bot posted (block_actions), by any action id: see adapters.slack.buttons.
    app.block_action(re.compile(".*"))(presses)
    return app


def _fields(body: Mapping[str, Any], headers: Mapping[str, Any]) -> dict[str, str]:
    event = body.get("event") if isinstance(body.get("event"), Mapping) else {}
    fields = {
        "event_id": str(body.get("event_id") or ""),
        "type": str(event.get("type") or body.get("type") or ""),
        "channel": str(event.get("channel") or ""),
    }
    retry = _header(headers, "x-slack-retry-num")
    if retry and retry != "0":
        fields["retry_num"] = retry
        fields["retry_reason"] = _header(headers, "x-slack-retry-reason") or ""
    return fields


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    value = headers.get(name)
    if isinstance(value, list | tuple):
        return str(value[0]) if value else None
    return None if value is None else str(value)
