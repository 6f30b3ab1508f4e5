"""The Telegram adapter: one bot token, updates by long polling or webhook, replies in Telegram HTML.

Liveness (:mod:`.liveness`): a probe asks Telegram how many updates wait that never reached us; a
reconnect restarts polling on a new connection, or registers the webhook again. There is no catch-up:
Telegram keeps an update until we confirm it, so whatever a deaf connection missed comes afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import structlog
from aiogram import Bot
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods import DeleteWebhook, GetMe, SetMyCommands, SetWebhook
from aiogram.types import BotCommand, BotCommandScopeAllGroupChats, BotCommandScopeAllPrivateChats
from aiogram.utils.token import TokenValidationError, validate_token

from adapters.contract import (
    Adapter,
    AdapterError,
    AdapterState,
    Attachment,
    Button,
    Capabilities,
    CatchUpPoint,
    ChatType,
    Intake,
    Liveness,
    Markup,
    MediaUnavailable,
    MenuCommand,
    OutboundMessage,
    Ownership,
    Rate,
    RateLimits,
    StreamMode,
)
from adapters.http_listener import ListenError, ListenerLimits

from .buttons import Presses
from .convert import PLATFORM, BotIdentity
from .downloads import FileDownloads
from .liveness import probe
from .polling import ALLOWED_UPDATES, Poller, PollingSettings
from .sending import Sender, SendingSession
from .webhook import WebhookServer
from .webhook_watch import WebhookWatchdog

log = structlog.get_logger(__name__)

START_TIMEOUT = 30
GROUP_RATE = Rate(20, 60.0)
"""Telegram's published limit for one group (or channel): 20 messages a minute, in place of one a second."""


class _Unreachable(AdapterError):
    """Telegram could not be reached, or answered with a server error: worth trying again."""


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    token: str
    api_base_url: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8443
    webhook_check_interval: float = 60.0
    """Webhook mode: seconds between getWebhookInfo checks of Telegram's delivery to us."""
    webhook_limits: ListenerLimits = ListenerLimits()
    """Webhook mode: how long the webhook server waits for slow clients, and how many it lets in at once."""
    polling: PollingSettings = PollingSettings()
    allowed_chats: frozenset[str] = frozenset()
    """Groups whose button presses are taken (empty: any), as the gateway answers messages there."""
    probe_grace: float = 5.0
    """Seconds a liveness probe that finds updates waiting gives polling (or the webhook) to receive one
    before it calls the connection deaf."""


class TelegramAdapter(Adapter):
    platform = PLATFORM
    capabilities = Capabilities(
        max_message_length=4096, length_unit="utf16", can_edit=True, markup=Markup.TELEGRAM_HTML,
        rates=RateLimits(per_chat=Rate(1, 1.0), overall=Rate(30, 1.0), stream_interval=1.0),
    )  # fmt: skip
    """Telegram publishes about one message a second per chat, 20 a minute per group (:meth:`chat_rate`) and
    30 a second overall; edits and drafts are counted like messages."""
    supports_buttons = True
    """An inline keyboard under a message; presses come as callback queries (:mod:`.buttons`)."""
    platform_hint = (
        "You are answering in Telegram. Write ordinary Markdown; the gateway converts it to "
        "Telegram's HTML. Bold, italic, strikethrough, inline code, code blocks, links and "
        "||spoilers|| all render. Tables do not, so present tabular facts as short lists or "
        '"label: value" lines. A Telegram message holds at most 4,096 characters; a longer '
        "reply is split into several messages, so put the answer first and keep it compact."
    )

    def __init__(self, settings: TelegramSettings) -> None:
        super().__init__()
        try:
            validate_token(settings.token)
        except TokenValidationError as error:
            raise AdapterError(
                "the Telegram bot token is malformed (expected digits, a colon, then letters, as @BotFather "
                "gives it); check platforms.telegram.token or TELEGRAM_BOT_TOKEN"
            ) from error
        if settings.mode == "webhook" and not (settings.webhook_url and settings.webhook_secret):
            raise AdapterError("Telegram webhook mode needs platforms.telegram.webhook_url and webhook_secret")
        self.settings = settings
        self.bot_username: str | None = None
        self.bot_id: int | None = None
        self._bot: Bot | None = None
        self._sender: Sender | None = None
        self._poller: Poller | None = None
        self._webhook: WebhookServer | None = None
        self._watchdog: WebhookWatchdog | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._receive = True
        """Whether this process receives (polls); False while another gateway holds the poller's lease."""
        self._ownership: Ownership | None = None
        self._intake: Intake | None = None
        self._identity: BotIdentity | None = None
        self._menu: asyncio.Task[None] | None = None
        self._downloads = FileDownloads()
        self._presses = Presses(lambda: self.on_button, allowed_chats=settings.allowed_chats)

    @classmethod
    def from_config(cls, section: Any) -> TelegramAdapter:
        """Build from ``platforms.telegram`` (config.models.TelegramConfig)."""
        if not section.token:
            raise AdapterError("Telegram needs a bot token: set TELEGRAM_BOT_TOKEN or platforms.telegram.token")
        return cls(
            TelegramSettings(
                token=section.token, api_base_url=section.api_base_url, mode=section.mode,
                webhook_url=section.webhook_url, webhook_secret=section.webhook_secret,
                webhook_host=section.webhook_listen.host, webhook_port=section.webhook_listen.port,
                webhook_check_interval=section.webhook_check_interval,
                webhook_limits=ListenerLimits.from_config(section.webhook_listen),
                polling=PollingSettings(poll_timeout=section.poll_timeout, stall_timeout=section.stall_timeout),
                allowed_chats=frozenset(section.allowed_chats),
            )
        )  # fmt: skip

    def new_bot(self) -> Bot:
        """A bot client on its own connection pool (polling replaces its pool when it stalls)."""
        base = self.settings.api_base_url
        session = SendingSession(api=TelegramAPIServer.from_base(base)) if base else SendingSession()
        return Bot(self.settings.token, session=session)

    def receiving_lease(self) -> str | None:
        """Polling: ``telegram:poll:<bot id>`` (one getUpdates poller per token); a webhook needs none."""
        return f"telegram:poll:{self.settings.token.split(':')[0]}" if self.settings.mode == "polling" else None

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self, intake: Intake, *, receive: bool = True) -> None:
        """Connect; if Telegram cannot be reached right now, keep trying in the background (DEGRADED
        meanwhile) instead of leaving the bot deaf until the next restart. A rejected token or a
        refused webhook setting fails at once. ``receive=False`` (polling): no poller until
        :meth:`start_receiving`."""
        self._receive = receive or self.settings.mode != "polling"
        self._intake = intake
        self._set_state(AdapterState.STARTING, "connecting to Telegram")
        self._bot = self.new_bot()
        self._sender = Sender(self._bot)
        try:
            await self._connect(self._bot, intake)
        except _Unreachable as error:
            self._set_state(AdapterState.DEGRADED, f"{error}; trying again in the background")
            log.warning("telegram.start_deferred", reason=str(error))
            self._connecting = asyncio.create_task(self._keep_connecting(self._bot, intake), name="telegram-connect")

    async def _keep_connecting(self, bot: Bot, intake: Intake) -> None:
        attempt = 0
        while True:
            attempt += 1
            await asyncio.sleep(self.settings.polling.backoff(attempt))
            try:
                await self._connect(bot, intake)
            except _Unreachable as error:
                wait = self.settings.polling.backoff(attempt + 1)
                self._set_state(AdapterState.DEGRADED, f"{error}; trying again in about {wait:.0f} s")
                log.warning("telegram.connect_retry", attempt=attempt, reason=str(error))
            except (AdapterError, ListenError) as error:  # past start-up, a taken webhook port fails only Telegram
                self._set_state(AdapterState.FAILED, str(error))
                log.error("telegram.failed", reason=str(error))
                return
            else:
                log.info("telegram.connected", attempts=attempt + 1)
                return

    async def _connect(self, bot: Bot, intake: Intake) -> None:
        identity = await self._identify(bot)
        if self.settings.mode == "webhook":
            await self._start_webhook(bot, identity, intake)
        else:
            await self._call_at_start(bot, DeleteWebhook(drop_pending_updates=False), "deleteWebhook")
            self._identity = identity
            if self._receive:
                self._start_poller(identity, intake)
            elif self._ownership is None:
                self._set_state(AdapterState.RUNNING, f"sending only as @{identity.username}: another gateway "
                                "receives (polls) for this bot")  # fmt: skip
        log.info("telegram.started", bot=f"@{identity.username}", mode=self.settings.mode,
                 api=self.settings.api_base_url or "api.telegram.org")  # fmt: skip
        if self.commands.private or self.commands.groups:
            self._menu = asyncio.create_task(self._publish_commands(bot), name="telegram-commands")

    def _start_poller(self, identity: BotIdentity, intake: Intake) -> None:
        self._poller = Poller(self.new_bot, identity, intake, self._set_state, self._note_inbound,
                              self.settings.polling, self._ownership, on_press=self._presses.handle)  # fmt: skip
        self._set_state(AdapterState.RUNNING, f"long polling as @{identity.username}")
        self._poller.start()

    async def start_receiving(self, ownership: Ownership) -> None:
        """Start polling with ``ownership`` (from the offset it carries); when still connecting, polling starts
        once connected."""
        if self.settings.mode != "polling":
            raise AdapterError("a Telegram webhook receives in every gateway; it has no poller to start")
        await self._stop_poller()
        self._receive, self._ownership = True, ownership
        if self._identity is not None and self._intake is not None:
            self._start_poller(self._identity, self._intake)

    async def stop_receiving(self) -> None:
        """Stop polling (the poller confirms and records its offset while the lease still holds); sending goes on."""
        self._receive, self._ownership = False, None
        await self._stop_poller()
        if self._identity is not None and self._state is AdapterState.RUNNING:
            self._set_state(AdapterState.RUNNING, f"sending only as @{self._identity.username}: another gateway "
                            "receives (polls) for this bot")  # fmt: skip

    async def _stop_poller(self) -> None:
        if self._poller is not None:
            poller, self._poller = self._poller, None
            await poller.stop()

    async def _publish_commands(self, bot: Bot) -> None:
        """Fill the menu Telegram shows behind "/" (one list for DMs, one for groups). A refusal is logged
        and changes nothing else: typed commands work without the menu."""
        scopes = (
            ("private", BotCommandScopeAllPrivateChats(), self.commands.private),
            ("groups", BotCommandScopeAllGroupChats(), self.commands.groups),
        )
        for name, scope, commands in scopes:
            if not commands:
                continue
            try:
                await bot(SetMyCommands(commands=_bot_commands(commands), scope=scope), request_timeout=START_TIMEOUT)
            except (TelegramAPIError, ClientDecodeError, TimeoutError) as error:
                log.warning("telegram.commands.not_set", scope=name, error=str(error),
                            hint="the / menu in Telegram stays as it was; commands still work when typed")  # fmt: skip
            else:
                log.info("telegram.commands.set", scope=name, commands=len(commands))

    async def _identify(self, bot: Bot) -> BotIdentity:
        me = await self._call_at_start(bot, GetMe(), "getMe")
        if not me.username:
            raise AdapterError("Telegram's getMe returned no username for this bot; check the token")
        self.bot_username, self.bot_id = me.username, me.id
        return BotIdentity(id=me.id, username=me.username)

    async def _start_webhook(self, bot: Bot, identity: BotIdentity, intake: Intake) -> None:
        url, secret = self.settings.webhook_url or "", self.settings.webhook_secret or ""
        listen = f"{self.settings.webhook_host}:{self.settings.webhook_port}"
        setting = SetWebhook(url=url, secret_token=secret, allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
        watchdog = WebhookWatchdog(bot, setting, interval=self.settings.webhook_check_interval, listen=listen,
                                   running_detail="", report=self._set_state)  # fmt: skip
        self._webhook = WebhookServer(
            bot, identity, intake, secret=secret, path=urlsplit(url).path or "/", host=self.settings.webhook_host,
            port=self.settings.webhook_port, on_inbound=self._note_inbound, on_reached=watchdog.note_delivery,
            limits=self.settings.webhook_limits, on_press=self._presses.handle,
        )  # fmt: skip
        await self._webhook.start()
        try:
            await self._call_at_start(bot, setting, "setWebhook")
        except AdapterError:
            await self._webhook.stop()
            raise
        running = (f"webhook {url} as @{identity.username}, listening on {self.settings.webhook_host}:"
                   f"{self._webhook.bound_port}")  # fmt: skip
        self._set_state(AdapterState.RUNNING, running)
        watchdog.running_detail = running
        self._watchdog = watchdog
        watchdog.start()

    async def _call_at_start(self, bot: Bot, method: Any, name: str) -> Any:
        try:
            return await bot(method, request_timeout=START_TIMEOUT)
        except TelegramUnauthorizedError as error:
            detail = "Telegram rejected the bot token (401); set a valid token from @BotFather"
            self._set_state(AdapterState.FAILED, detail)
            raise AdapterError(detail) from error
        except (TelegramNetworkError, TelegramServerError, TelegramRetryAfter, ClientDecodeError) as error:
            where = self.settings.api_base_url or "api.telegram.org"
            raise _Unreachable(f"{name} failed ({error}); check the network and that {where} is reachable") from error
        except TelegramAPIError as error:
            detail = f"Telegram refused {name} at start: {error}"
            self._set_state(AdapterState.FAILED, detail)
            raise AdapterError(detail) from error

    async def stop_intake(self) -> None:
        for task in (self._connecting, self._menu):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._connecting = self._menu = None
        self._intake = None
        await self._stop_poller()
        if self._watchdog is not None:
            watchdog, self._watchdog = self._watchdog, None
            await watchdog.stop()
        if self._webhook is not None:
            webhook, self._webhook = self._webhook, None
            await webhook.stop()
        if self._state not in (AdapterState.STOPPED, AdapterState.NEW):
            self._set_state(AdapterState.STOPPING, "intake stopped; sending still works")

    async def close(self) -> None:
        await self.stop_intake()
        if self._bot is not None:
            bot, self._bot = self._bot, None
            await bot.session.close()
        await self._downloads.close()
        self._sender = None
        self._set_state(AdapterState.STOPPED)

    # --- outbound ----------------------------------------------------------------------------
    async def send(self, message: OutboundMessage) -> str:
        return await self._sending().send(message)

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        await self._sending().edit(chat_id, message_id, text, markup)

    async def send_choice(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, thread_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        return await self._sending().send_choice(chat_id, text, buttons, thread_id, reply_to)

    async def close_choice(self, chat_id: str, message_id: str, text: str) -> None:
        await self._sending().edit(chat_id, message_id, text, Markup.PLAIN, drop_buttons=True)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._sending().typing(chat_id, thread_id)

    def chat_rate(self, chat_id: str) -> Rate:
        """Groups, supergroups and channels (negative ids, or an ``@channel`` name) take 20 a minute."""
        private = chat_id.isdigit()
        return self.capabilities.rates.per_chat if private else GROUP_RATE

    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        """Drafts in private chats (the Bot API has them nowhere else), editing a message everywhere."""
        return (StreamMode.DRAFT, StreamMode.EDIT) if chat_type is ChatType.DM else (StreamMode.EDIT,)

    async def send_draft(
        self, chat_id: str, thread_id: str | None, draft_id: int, text: str, *, markup: Markup = Markup.PLAIN
    ) -> None:
        await self._sending().draft(chat_id, thread_id, draft_id, text, markup)

    # --- files users sent ---------------------------------------------------------------------
    async def fetch_media(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        """``getFile``, then the file from the configured API base (see :mod:`.downloads`)."""
        if self._bot is None:
            raise MediaUnavailable("failed", "the Telegram adapter is not connected (not started, or closed)")
        return await self._downloads.fetch(self._bot, attachment, max_bytes=max_bytes, timeout=timeout)

    # --- liveness -----------------------------------------------------------------------------
    async def probe_liveness(self, points: Sequence[CatchUpPoint]) -> Liveness:
        """getMe, then getWebhookInfo's pending count against what was received (see :mod:`.liveness`);
        ``points`` are not needed: Telegram itself counts what waits for the bot."""
        receiver = self._poller if self.settings.mode == "polling" else self._webhook if self._watchdog else None
        if self._bot is not None and self._identity is not None and not self._receive:
            return Liveness(True, "sending only: another gateway receives (polls) for this bot")
        if self._bot is None or receiver is None:
            state = f"{self._state.value}: {self._detail}" if self._detail else self._state.value
            return Liveness(False, f"not connected to Telegram ({state})")
        return await probe(self._bot, receiver, grace=self.settings.probe_grace, watchdog=self._watchdog)

    async def reconnect(self, reason: str) -> None:
        """Polling: a new connection (:meth:`.Poller.restart`); webhook: setWebhook again
        (:meth:`.WebhookWatchdog.reregister`). DEGRADED with ``reason`` until updates flow; no gap to report,
        since Telegram still holds whatever was missed."""
        if self._poller is not None:
            self._poller.restart(reason)
        elif self._watchdog is not None:
            self._watchdog.reregister(reason)
        elif self._connecting is not None and not self._connecting.done():
            self._set_state(AdapterState.DEGRADED, f"{reason}; still trying to connect in the background")
        else:
            raise AdapterError("the Telegram adapter cannot reconnect: it is not connected (not started, or stopped)")
        log.warning("telegram.reconnect", reason=reason, mode=self.settings.mode)

    def _sending(self) -> Sender:
        if self._sender is None:
            raise AdapterError("the Telegram adapter is not connected (not started, or closed)")
        return self._sender


def _bot_commands(commands: tuple[MenuCommand, ...]) -> list[BotCommand]:
    return [BotCommand(command=command.name, description=command.description) for command in commands]
