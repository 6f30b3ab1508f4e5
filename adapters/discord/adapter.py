"""The Discord adapter: DMs and server messages in, Discord Markdown out, on discord.py 2.

States shown on /health:

* STARTING until the first READY; RUNNING while connected;
* DEGRADED while discord.py resumes or the supervisor rebuilds the client;
* FAILED for good when Discord refuses the token (401 / close 4004) or a
  privileged intent (close 4014); the detail says what to change.

Every new session after the first (discord.py identified afresh because Discord would not
resume, the supervisor rebuilt the client, or :meth:`reconnect` asked for it) is reported as a
gap: Discord does not replay what was sent before it. The gateway then asks :meth:`catch_up`
for what the DMs and threads with an open session missed (see :mod:`adapters.discord.history`).
A quiet connection is probed with :meth:`probe_liveness` (see :mod:`adapters.discord.liveness`).

Files users attach are downloaded from Discord's CDN on request (:meth:`fetch_media`, see
:mod:`adapters.discord.media`).

Buttons (:meth:`send_choice`, :meth:`close_choice`, presses to ``on_button``): see
:mod:`adapters.discord.buttons`. Presses come on the gateway WebSocket like messages, so only the
process that holds it (all of them without a lease; the lease holder in a cluster) receives them;
one that only sends never does. A press is handed over whether or not the lease still holds at that
moment: Discord sends each interaction to one session only and no catch-up brings it back, so
dropping it (as a message is dropped, to be caught up by the holder) would lose it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import discord
import structlog

from adapters.contract import (
    Adapter,
    AdapterError,
    AdapterState,
    Attachment,
    Button,
    Capabilities,
    CatchUpPoint,
    CatchUpWindow,
    InboundMessage,
    Intake,
    Liveness,
    Markup,
    OutboundMessage,
    Ownership,
    Rate,
    RateLimits,
    TransientDeliveryError,
    log_rejected,
)
from adapters.discord import buttons, endpoints, history, liveness, preflight
from adapters.discord.client import GatewayClient
from adapters.discord.convert import to_inbound
from adapters.discord.media import AttachmentDownloads
from adapters.discord.sending import MAX_LIBRARY_WAIT, Sender
from adapters.discord.supervisor import Backoff, Supervisor

log = structlog.get_logger(__name__)

_SENDING_ONLY = "sending only: another gateway receives (holds the gateway WebSocket) for this bot"
START_WAIT = 15.0
"""How long start() waits for the first READY before returning with the adapter DEGRADED (still connecting)."""
REMEMBERED_CHANNELS = 4096
"""Channels whose newest arrived message is remembered for the liveness probe (the least recent are dropped)."""


class DiscordSection(Protocol):
    """The fields of ``platforms.discord`` the adapter reads (config.models.DiscordConfig)."""

    token: str | None
    api_base_url: str | None
    gateway_url: str | None
    message_content_intent: bool
    allow_bots: bool
    allowed_guilds: list[str]
    allowed_channels: list[str]


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    token: str
    api_base_url: str | None = None
    gateway_url: str | None = None
    message_content_intent: bool = False
    allow_bots: bool = False
    allowed_guilds: frozenset[str] = frozenset()
    """Servers whose button presses are taken (empty: any), as the gateway answers messages there."""
    allowed_channels: frozenset[str] = frozenset()
    """Channels whose button presses are taken (empty: any)."""


class DiscordAdapter(Adapter):
    platform = "discord"
    supports_buttons = True
    capabilities = Capabilities(
        max_message_length=2000, length_unit="chars", can_edit=True, markup=Markup.DISCORD_MARKDOWN,
        rates=RateLimits(per_chat=Rate(5, 5.0), overall=None, stream_interval=1.0),
    )  # fmt: skip
    """Discord lets a bot create or edit 5 messages per 5 seconds in one channel (a thread and a DM are channels
    of their own); replies stream by editing one message (the default :meth:`stream_modes`)."""
    platform_hint = (
        "You are answering in Discord. Markdown renders: bold, italic, strikethrough, inline "
        "code, code blocks, lists, quotes and links. Tables do not, so use lists instead. A "
        "Discord message holds at most 2,000 characters; a longer reply is split into several "
        "messages, so be brief and put the answer first."
    )
    chats_setting = "allowed_channels"
    servers_setting = "allowed_guilds"

    def __init__(
        self,
        settings: DiscordSettings,
        *,
        backoff: Backoff = Backoff(),
        start_wait: float = START_WAIT,
        probe_grace: float = liveness.PROBE_GRACE,
    ) -> None:
        super().__init__()
        self._settings = settings
        self._probe_grace = probe_grace
        self._identified = False
        """A session was opened before: the next IDENTIFY (not a RESUME) leaves a gap."""
        self._arrived: OrderedDict[int, int] = OrderedDict()
        """Channel id -> the newest message id that arrived on the socket there."""
        self._intents = preflight.intents_for(settings.message_content_intent)
        self._start_wait = start_wait
        self._intake: Intake | None = None
        self._inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._supervisor = Supervisor(
            token=settings.token, build_client=self._build_client, on_trouble=self._trouble, on_fatal=self._fatal,
            backoff=backoff,
        )  # fmt: skip
        self._rest: discord.Client | None = None
        """Started without receiving (another gateway holds the WebSocket): a client logged in for REST only,
        which sends whether or not this process receives."""
        self._ownership: Ownership | None = None
        self._fenced: asyncio.Task[None] | None = None
        self._sender = Sender(self._sending_client, lambda: self._supervisor.fatal)
        self._downloads = AttachmentDownloads(settings.api_base_url)

    @classmethod
    def from_config(cls, section: DiscordSection) -> DiscordAdapter:
        if not section.token:
            raise AdapterError("no Discord bot token: set DISCORD_BOT_TOKEN or platforms.discord.token")
        return cls(
            DiscordSettings(
                token=section.token, api_base_url=section.api_base_url, gateway_url=section.gateway_url,
                message_content_intent=section.message_content_intent, allow_bots=section.allow_bots,
                allowed_guilds=frozenset(section.allowed_guilds), allowed_channels=frozenset(section.allowed_channels),
            )
        )  # fmt: skip

    @property
    def bot_username(self) -> str | None:
        client = self._sending_client()
        return client.user.name if client is not None and client.user is not None else None

    @property
    def restarts(self) -> int:
        """How many times the supervisor rebuilt the client (for tests and diagnostics)."""
        return self._supervisor.restarts

    def receiving_lease(self) -> str:
        """``discord:gateway:<bot id>``: one gateway WebSocket per bot (the id is read from the token)."""
        return f"discord:gateway:{_bot_id_of(self._settings.token)}"

    def _sending_client(self) -> discord.Client | None:
        return self._rest if self._rest is not None else self._supervisor.client

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self, intake: Intake, *, receive: bool = True) -> None:
        """Connect to the gateway WebSocket; ``receive=False``: log in for sending (REST) only, until
        :meth:`start_receiving`."""
        endpoints.point_at(self._settings.api_base_url, self._settings.gateway_url)
        log.info("discord.intents", **preflight.describe(self._intents))
        self._intake = intake
        self._set_state(AdapterState.STARTING, "connecting to the Discord gateway")
        self._worker = asyncio.create_task(self._hand_over(), name="discord.intake")
        if not receive:
            await self._log_in_for_sending()
            return
        await self._supervisor.start(self._start_wait)
        if self._supervisor.fatal is not None:
            await self._stop_worker()
            raise AdapterError(self._supervisor.fatal)
        if self._state is AdapterState.STARTING:
            self._set_state(AdapterState.DEGRADED, "still connecting to the Discord gateway")

    async def _log_in_for_sending(self) -> None:
        client = discord.Client(intents=self._intents, max_ratelimit_timeout=MAX_LIBRARY_WAIT)
        try:
            await client.login(self._settings.token)
        except Exception as error:
            await client.close()
            await self._stop_worker()
            fatal = preflight.unrecoverable(error)
            self._set_state(AdapterState.FAILED, fatal or f"logging in to Discord failed: {error}")
            raise AdapterError(fatal or f"logging in to Discord failed ({error}); check the network and "
                               "platforms.discord.api_base_url") from error  # fmt: skip
        self._rest = client
        self._set_state(AdapterState.RUNNING, _SENDING_ONLY)

    async def start_receiving(self, ownership: Ownership) -> None:
        """Open the gateway WebSocket (in the background); its events are handed over while ``ownership`` holds.
        The first session counts as a gap: what was sent while no gateway held the WebSocket is caught up."""
        await self._supervisor.stop()
        self._ownership, self._identified = ownership, True
        self._set_state(AdapterState.STARTING, "connecting to the Discord gateway")
        await self._supervisor.start(0)

    async def stop_receiving(self) -> None:
        self._ownership = None
        await self._supervisor.stop()
        if self._state not in (AdapterState.FAILED, AdapterState.STOPPING, AdapterState.STOPPED):
            self._set_state(AdapterState.RUNNING, _SENDING_ONLY)

    def _holds(self) -> bool:
        """Whether events may be handed over: always without a lease; with one, while it holds."""
        if self._ownership is None:
            return self._rest is None
        if self._ownership.held():
            return True
        if self._fenced is None or self._fenced.done():
            log.warning("discord.fenced", lease=self._ownership.lease,
                        hint="this gateway no longer holds the WebSocket's lease; another one receives")  # fmt: skip
            self._fenced = asyncio.get_running_loop().create_task(self.stop_receiving(), name="discord.fenced")
        return False

    async def stop_intake(self) -> None:
        self._intake = None
        if self._state not in (AdapterState.FAILED, AdapterState.STOPPED):
            self._set_state(AdapterState.STOPPING, "intake stopped; sending still works")

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._intake = None
        await self._supervisor.stop()
        if self._rest is not None:
            rest, self._rest = self._rest, None
            await rest.close()
        await self._stop_worker()
        await self._downloads.close()
        if self._state is not AdapterState.FAILED:
            self._set_state(AdapterState.STOPPED)
        log.info("discord.closed", restarts=self._supervisor.restarts)

    # --- outbound --------------------------------------------------------------------------
    async def send(self, message: OutboundMessage) -> str:
        return await self._sender.send(message)

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        await self._sender.edit(chat_id, message_id, text, markup)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._sender.typing(chat_id, thread_id)

    async def send_choice(
        self, chat_id: str, text: str, choices: Sequence[Button], *, thread_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        message = OutboundMessage(chat_id=chat_id, text=_plain(text), thread_id=thread_id, reply_to=reply_to)
        return await self._sender.send(message, view=buttons.row_of(choices))

    async def close_choice(self, chat_id: str, message_id: str, text: str) -> None:
        await self._sender.edit(chat_id, message_id, _plain(text), Markup.PLAIN, drop_buttons=True)

    # --- files that came with a message ------------------------------------------------------
    async def fetch_media(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        return await self._downloads.fetch(attachment, max_bytes=max_bytes, timeout=timeout)

    # --- liveness and catching up -------------------------------------------------------------
    async def probe_liveness(self, points: Sequence[CatchUpPoint]) -> Liveness:
        if self._rest is not None and self._ownership is None:
            return Liveness(True, _SENDING_ONLY)
        return await liveness.probe(
            self._supervisor.client, points, arrived=lambda channel: self._arrived.get(channel, 0),
            convert=self._convert, grace=self._probe_grace,
        )  # fmt: skip

    async def reconnect(self, reason: str) -> None:
        if self._closing or self._state in (AdapterState.STOPPING, AdapterState.STOPPED, AdapterState.FAILED):
            log.info("discord.reconnect_skipped", reason=reason, state=self._state.value)
            return
        self._set_state(AdapterState.DEGRADED, f"reconnecting: {reason}")
        log.warning("discord.reconnecting", reason=reason, hint="a new session is opened; what it missed is caught up")
        self._supervisor.restart(reason)

    async def catch_up(self, points: Sequence[CatchUpPoint], window: CatchUpWindow) -> list[InboundMessage]:
        if self._rest is not None and self._ownership is None:
            return []  # the gateway that receives catches up
        client = self._supervisor.client
        if client is None or client.is_closed() or client.user is None:
            raise TransientDeliveryError("the Discord connection is restarting; catch up after it is back")
        return await history.catch_up(client, list(points), window, self._convert)

    # --- client events ---------------------------------------------------------------------
    def connected(self, client: discord.Client, *, resumed: bool) -> None:
        if client is not self._supervisor.client or self._closing:
            return
        self._supervisor.connected()
        user = client.user
        who = f"{user.name} ({user.id})" if user is not None else "unknown"
        how = "resumed the session" if resumed else "connected"
        self._set_state(AdapterState.RUNNING, f"{how} as {who}")
        log.info("discord.resumed" if resumed else "discord.connected", bot=who, guilds=len(client.guilds))
        if not resumed:
            if self._identified:
                self._report_gap("Discord opened a new session (IDENTIFY) instead of resuming the old one; "
                                 "messages sent in between were not delivered")  # fmt: skip
            self._identified = True

    def arrived(self, channel_id: int, message_id: int) -> None:
        if message_id > self._arrived.get(channel_id, 0):
            self._arrived[channel_id] = message_id
        self._arrived.move_to_end(channel_id)
        while len(self._arrived) > REMEMBERED_CHANNELS:
            self._arrived.popitem(last=False)

    def disconnected(self, client: discord.Client) -> None:
        if client is not self._supervisor.client or self._closing or self._supervisor.fatal is not None:
            return
        if self._state in (AdapterState.RUNNING, AdapterState.STARTING):
            self._set_state(AdapterState.DEGRADED, "gateway connection lost; discord.py is reconnecting")
            log.warning("discord.disconnected", hint="discord.py resumes the session by itself")

    def message(self, client: discord.Client, message: discord.Message) -> None:
        if client.user is None or self._intake is None or not self._holds():
            return
        inbound = self._convert(message, client)
        if inbound is not None:
            self._note_inbound()
            self._inbox.put_nowait(inbound)

    async def pressed(self, client: discord.Client, interaction: discord.Interaction) -> None:
        """A component interaction: acknowledged at once, then handed to ``on_button`` (see :mod:`.buttons`)."""
        if not buttons.is_press(interaction) or self._closing:
            return
        await buttons.acknowledge(interaction)
        fields = {"interaction": str(interaction.id), "channel": str(interaction.channel_id or ""),
                  "user": str(getattr(interaction.user, "id", ""))}  # fmt: skip
        try:
            press = buttons.to_press(interaction)
        except Exception as error:  # noqa: BLE001 - one unreadable press is skipped, not fatal
            log_rejected(log, "discord.button.rejected", error, **fields)
            return
        settings = self._settings
        why = buttons.refusal(interaction, press, guilds=settings.allowed_guilds, channels=settings.allowed_channels)
        listener = self.on_button
        if why is not None or listener is None:
            log.info("discord.button.ignored", reason=why or "nobody listens for presses", button=press.button_id,
                     **fields)  # fmt: skip
            return
        try:
            await listener(press)
        except Exception:  # noqa: BLE001 - the listener's failure is logged, the connection goes on
            log.exception("discord.button.failed", button=press.button_id, **fields)

    # --- internals -------------------------------------------------------------------------
    def _convert(self, message: discord.Message, client: discord.Client | None = None) -> InboundMessage | None:
        """``message`` as the gateway gets it, live or caught up; None for one the bot is not shown, or one that
        cannot be converted (logged, skipped)."""
        client = client or self._supervisor.client
        me = client.user if client is not None else None
        if me is None:
            return None
        try:
            return to_inbound(message, me, allow_bots=self._settings.allow_bots)
        except Exception as error:  # noqa: BLE001 - a message that cannot be converted is skipped, not fatal
            author = getattr(message, "author", None)  # discord.py leaves it unset when the event had none
            log_rejected(log, "discord.message.rejected", error, message_id=str(message.id),
                         channel=str(message.channel.id), user=str(getattr(author, "id", "")))  # fmt: skip
            return None

    def _build_client(self) -> discord.Client:
        return GatewayClient(self, intents=self._intents, max_ratelimit_timeout=MAX_LIBRARY_WAIT)

    def _trouble(self, detail: str) -> None:
        if not self._closing:
            self._set_state(AdapterState.DEGRADED, detail)

    def _fatal(self, detail: str) -> None:
        self._set_state(AdapterState.FAILED, detail)

    async def _hand_over(self) -> None:
        """Give messages to the gateway one at a time, so a chat's messages are stored in the order they came."""
        while True:
            inbound = await self._inbox.get()
            intake = self._intake
            if intake is None:
                log.info("discord.dropped_after_stop", event_id=inbound.event_id, chat=inbound.chat_id)
                continue
            if not self._holds():  # the holder of the WebSocket's lease catches it up after its gap
                log.info("discord.dropped_not_held", event_id=inbound.event_id, chat=inbound.chat_id)
                continue
            try:
                await intake(inbound)
            except Exception as error:  # noqa: BLE001 - one message the gateway could not take must not stop the rest
                log.error("discord.intake_failed", event_id=inbound.event_id, chat=inbound.chat_id, error=str(error),
                          hint="the message was not stored; the user has to send it again")  # fmt: skip

    async def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None


def _plain(text: str) -> str:
    """``text`` shown as written (Markdown escaped: a tool's ``__`` would underline), cut to Discord's limit."""
    escaped = discord.utils.escape_markdown(text)
    limit = DiscordAdapter.capabilities.max_message_length
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def _bot_id_of(token: str) -> str:
    """The bot's user id, which a Discord bot token starts with (base64); a digest of the token if it does not."""
    head = token.split(".", 1)[0]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    return decoded if decoded.isdigit() else "token-" + hashlib.sha256(token.encode()).hexdigest()[:16]
