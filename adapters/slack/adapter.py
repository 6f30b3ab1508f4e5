"""SlackAdapter: one Slack app (bot user) in one workspace, in Socket Mode or HTTP mode.

Inbound: see :mod:`adapters.slack.workspaces` for whose events are taken in at all,
:mod:`adapters.slack.convert` for which events become messages,
:mod:`adapters.slack.threads` for the threads where replies need no mention
and :mod:`adapters.slack.app` for when Slack gets its ack. Outbound:
chat.postMessage in mrkdwn, in the thread the message came from, with the
chunk's nonce in message metadata so a resend finds it
(:mod:`adapters.slack.resend`); chat.update for edits. Buttons under a message (Block Kit
actions, ``block_actions`` presses in both modes) are :mod:`adapters.slack.buttons`; in a cluster in
Socket Mode only the gateway that holds the socket receives presses, in HTTP mode any gateway Slack
calls. A reply in a thread can stream natively (``chat.startStream`` / ``appendStream`` / ``stopStream``) and
show the thread's status line (``assistant.threads.setStatus``), see
:mod:`adapters.slack.streaming`; elsewhere it is posted, then updated. Sender names come from users.info (:mod:`adapters.slack.users`,
scope ``users:read``). Files users share are downloaded on request with the bot
token, from Slack's file host only (:mod:`adapters.slack.files`, scope
``files:read``). Slack has no typing indicator for bots, so :meth:`typing` does
nothing.

Liveness: :meth:`probe_liveness` is :func:`adapters.slack.liveness.probe`;
:meth:`reconnect` asks slack_sdk's client for a new Socket Mode session; every
session after the first (a ``hello``, see :mod:`.socket_mode`) is reported as a
gap, and :meth:`catch_up` reads the open conversations' history
(:mod:`.history`). In HTTP mode Slack retries an event the events URL did not
acknowledge by itself, so there is no gap to report; a reconnect there only
marks the adapter degraded until Slack calls again, and a catch-up still reads
the history.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

import aiohttp
import structlog
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import (
    Adapter,
    AdapterError,
    AdapterState,
    AdapterStatus,
    Attachment,
    Button,
    Capabilities,
    CatchUpPoint,
    CatchUpWindow,
    ChatType,
    InboundMessage,
    Intake,
    Liveness,
    Markup,
    OutboundMessage,
    Ownership,
    Rate,
    RateLimits,
    RecipientUnavailable,
    StreamMode,
)
from adapters.http_listener import ListenerLimits
from adapters.slack import liveness, sending, streaming
from adapters.slack.app import EventSink, build_app
from adapters.slack.buttons import PressSink, choice_blocks, closed_blocks
from adapters.slack.convert import PLATFORM
from adapters.slack.files import FileDownloads
from adapters.slack.history import HistoryReader
from adapters.slack.http_mode import HttpReceiver
from adapters.slack.identity import BotIdentity
from adapters.slack.resend import PostedLookup
from adapters.slack.socket_mode import SocketReceiver
from adapters.slack.threads import ThreadMemory
from adapters.slack.users import UserNames
from adapters.slack.workspaces import Workspaces

log = structlog.get_logger(__name__)

MAX_MESSAGE_CHARS: Final = 3900
"""Slack accepts 40,000 characters, but clients cut or fold text past about 4,000; stay under that."""
RATES: Final = RateLimits(per_chat=Rate(1, 1.0), overall=None, stream_interval=0.5)
"""chat.postMessage takes about one message a second per channel (chat.update is counted with it here);
chat.appendStream is Tier 4, so a streamed message may grow twice a second."""
_SENDING_ONLY: Final = "sending only: another gateway receives (holds the Socket Mode connection) for this app"
STREAM_NONCES: Final = 1_000
"""Streams whose chunk nonce is kept until they are stopped (one per reply being written)."""


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """What the adapter needs from ``platforms.slack`` (see ``config.models.SlackConfig``)."""

    bot_token: str
    mode: Literal["socket", "http"] = "socket"
    app_token: str | None = None
    signing_secret: str | None = None
    api_base_url: str | None = None
    listen_host: str = "127.0.0.1"
    listen_port: int = 3000
    listen_path: str = "/slack/events"
    listen_limits: ListenerLimits = ListenerLimits()
    """HTTP mode: how long the events endpoint waits for slow clients, and how many it lets in at once."""
    require_mention: bool = True
    """False: every channel message the app receives starts or continues a turn, not only mentions."""
    allowed_teams: tuple[str, ...] = ()
    """Workspaces (or organisations) besides the installed one whose events are taken in (Slack Connect)."""
    allowed_users: tuple[str, ...] = ()
    """The gateway's allowlist, read here only to let a named external user through (see :mod:`.workspaces`)."""
    allowed_channels: tuple[str, ...] = ()
    """The channels the bot answers in (empty: any), read here for button presses (see :mod:`.buttons`)."""


class SlackAdapter(Adapter):
    platform: ClassVar[str] = PLATFORM
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_message_length=MAX_MESSAGE_CHARS, length_unit="chars", can_edit=True, markup=Markup.SLACK_MRKDWN,
        rates=RATES,
    )
    platform_hint: ClassVar[str] = (
        "You are answering in Slack, which renders its own mrkdwn format rather than full "
        "Markdown: bold, italic, strikethrough, inline code, code blocks, quotes, simple lists "
        "and links work; headings and tables do not. Replies longer than roughly 3,000-4,000 "
        "characters are split into several messages, so keep answers short and skimmable."
    )
    chats_setting: ClassVar[str] = "allowed_channels"
    supports_buttons: ClassVar[bool] = True

    def __init__(self, settings: SlackSettings) -> None:
        super().__init__()
        _check(settings)
        self._settings = settings
        self._client: AsyncWebClient = sending.build_client(settings.bot_token, settings.api_base_url)
        self._session: aiohttp.ClientSession | None = None
        self._files = FileDownloads(self._client, lambda: self._session, settings.api_base_url)
        self._sink: EventSink | None = None
        self._presses = PressSink(lambda: self.on_button, channels=settings.allowed_channels)
        self._socket: SocketReceiver | None = None
        self._http: HttpReceiver | None = None
        self._threads: ThreadMemory | None = None
        self._names: UserNames | None = None
        self._lookup: PostedLookup | None = None
        self._workspaces: Workspaces | None = None
        self._history: HistoryReader | None = None
        self._app: Any = None
        self._receive = True
        """Socket Mode: whether this process receives; False while another gateway holds the socket's lease."""
        self._ownership: Ownership | None = None
        self._socket_closing: asyncio.Task[None] | None = None
        self._reconnecting: str | None = None
        """Why a reconnect was asked for, until the new session (or the next HTTP event) is there."""
        self._stream_nonces: OrderedDict[tuple[str, str], str] = OrderedDict()
        """(channel, ts) of a stream started here -> the nonce its stop puts in the message metadata."""
        self.bot: BotIdentity | None = None

    @classmethod
    def from_config(cls, section: Any) -> SlackAdapter:
        listen = section.http_listen
        return cls(
            SlackSettings(
                bot_token=section.bot_token or "", mode=section.mode, app_token=section.app_token,
                signing_secret=section.signing_secret, api_base_url=section.api_base_url,
                listen_host=listen.host, listen_port=listen.port, listen_path=listen.path,
                listen_limits=ListenerLimits.from_config(listen),
                require_mention=section.require_mention, allowed_teams=tuple(section.allowed_teams),
                allowed_users=tuple(section.allowed_users), allowed_channels=tuple(section.allowed_channels),
            )  # fmt: skip
        )

    @property
    def bot_username(self) -> str | None:
        return self.bot.name if self.bot else None

    @property
    def http_url(self) -> str | None:
        """The events endpoint's address once listening (HTTP mode), with the real port."""
        return self._http.url if self._http else None

    def receiving_lease(self) -> str | None:
        """Socket Mode: ``slack:socket:<app id>`` (the app id is read from the app token); HTTP mode needs none."""
        if self._settings.mode != "socket":
            return None
        token = self._settings.app_token or ""
        parts = token.split("-")
        app_id = parts[2] if len(parts) > 3 and parts[0] == "xapp" else "token-" + hashlib.sha256(token.encode()).hexdigest()[:16]
        return f"slack:socket:{app_id}"

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self, intake: Intake, *, receive: bool = True) -> None:
        """Connect; ``receive=False`` (Socket Mode): no socket until :meth:`start_receiving`."""
        if self._state not in (AdapterState.NEW, AdapterState.FAILED):
            raise AdapterError(f"cannot start SlackAdapter: it is {self._state.value}")
        self._receive = receive or self._settings.mode != "socket"
        self._set_state(AdapterState.STARTING)
        try:
            await self._start(intake)
        except BaseException as error:
            self._set_state(AdapterState.FAILED, str(error))
            await self._release()
            raise

    async def _start(self, intake: Intake) -> None:
        settings = self._settings
        self._session = aiohttp.ClientSession()
        self._client.session = self._session
        try:
            identity = await self._client.auth_test()
        except Exception as error:  # noqa: BLE001 - translated into an error that names the setting
            raise sending.startup_error("auth.test", "platforms.slack.bot_token (xoxb-…)", error) from error
        self.bot = BotIdentity.from_auth_test(identity.data)  # type: ignore[arg-type]
        self._threads = ThreadMemory(self._client, self.bot)
        self._names = UserNames(self._client)
        self._lookup = PostedLookup(self._client, self.bot)
        self._workspaces = Workspaces(self.bot, allowed_teams=settings.allowed_teams,
                                      allowed_users=settings.allowed_users)  # fmt: skip
        self._history = HistoryReader(self._client, self.bot, self._names, self._workspaces,
                                      every_message=not settings.require_mention)  # fmt: skip
        self._sink = EventSink(
            self.bot, self._threads, self._names, self._accepted, every_message=not self._settings.require_mention,
            workspaces=self._workspaces,
        )  # fmt: skip
        self._sink.open(self._fenced(intake))
        app = self._app = build_app(self._client, settings.signing_secret or "", self.bot, self._sink, self._presses)
        if settings.mode == "http":
            self._http = HttpReceiver(app, signing_secret=settings.signing_secret or "", host=settings.listen_host,
                                      port=settings.listen_port, path=settings.listen_path,
                                      limits=settings.listen_limits)  # fmt: skip
            await self._http.start()
            self._set_state(AdapterState.RUNNING, f"HTTP events on {self._http.url} as @{self.bot.name}")
            return
        if not self._receive:
            self._set_state(AdapterState.RUNNING, _SENDING_ONLY)
            return
        await self._open_socket()

    def _fenced(self, intake: Intake) -> Intake:
        """``intake``, refusing (so Slack does not get its ack and delivers the event again, to whichever gateway
        holds the socket then) while this process holds a lease no more."""

        async def intake_while_held(message: InboundMessage) -> None:
            ownership = self._ownership
            if ownership is not None and not ownership.held():
                log.warning("slack.fenced", lease=ownership.lease, event_id=message.event_id,
                            hint="this gateway no longer holds the socket's lease; Slack delivers the event again")  # fmt: skip
                if self._socket is not None and self._ownership is ownership:
                    self._socket_closing = asyncio.get_running_loop().create_task(self.stop_receiving(),
                                                                                  name="slack-fenced")  # fmt: skip
                raise AdapterError("this gateway no longer holds the Slack socket's lease")
            await intake(message)

        return intake_while_held

    async def start_receiving(self, ownership: Ownership) -> None:
        """Open the Socket Mode connection (waiting a few seconds for its first session); events are handed over
        while ``ownership`` holds. Its first session counts as a gap: what came while no gateway held it is caught up."""
        if self._settings.mode != "socket":
            raise AdapterError("Slack's HTTP mode receives in every gateway; it has no socket to start")
        await self._close_socket()
        self._receive, self._ownership = True, ownership
        await self._open_socket(replacing=True)

    async def stop_receiving(self) -> None:
        self._receive, self._ownership = False, None
        await self._close_socket()
        if self._state in (AdapterState.RUNNING, AdapterState.DEGRADED):
            self._set_state(AdapterState.RUNNING, _SENDING_ONLY)

    async def _close_socket(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.stop()

    async def _open_socket(self, *, replacing: bool = False) -> None:
        on_session = self._new_session if not replacing else lambda replaced: self._new_session(True)
        self._socket = SocketReceiver(self._app, self._client, self._settings.app_token or "", on_session=on_session)
        if await self._socket.start():
            self._set_state(AdapterState.RUNNING, f"Socket Mode as @{self.bot.name}")
        else:
            self._set_state(AdapterState.DEGRADED, "Socket Mode still connecting")
            log.warning("slack.socket.slow_connect", hint="the client keeps trying; see slack_sdk log lines")

    async def stop_intake(self) -> None:
        if self._sink is not None:
            self._sink.close()
        await self._stop_receivers()
        if self._state in (AdapterState.RUNNING, AdapterState.DEGRADED):
            self._set_state(AdapterState.STOPPING, "intake stopped")

    async def close(self) -> None:
        if self._sink is not None:
            self._sink.close()
        await self._release()
        self._set_state(AdapterState.STOPPED)

    async def _stop_receivers(self) -> None:
        socket, self._socket = self._socket, None
        http, self._http = self._http, None
        if socket is not None:
            await socket.stop()
        if http is not None:
            await http.stop()
        if self._sink is not None:
            await self._sink.drain()
        await self._presses.drain()
        if self._threads is not None:
            await self._threads.close()
        if self._names is not None:
            await self._names.close()

    async def _release(self) -> None:
        await self._stop_receivers()
        session, self._session = self._session, None
        self._client.session = None
        if session is not None:
            await session.close()

    def status(self) -> AdapterStatus:
        if self._state is AdapterState.RUNNING and self._socket is not None and not self._socket.looks_connected():
            return AdapterStatus(AdapterState.DEGRADED, "Socket Mode reconnecting", self._last_inbound_at)
        if (self._state is AdapterState.DEGRADED and self._reconnecting is None and self._socket is not None
                and self._socket.looks_connected()):  # fmt: skip
            self._set_state(AdapterState.RUNNING, f"Socket Mode as @{self.bot_username}")
        return super().status()

    def _accepted(self) -> None:
        """An event was handed to the gateway: in HTTP mode, Slack calling again ends a reconnect's wait."""
        self._note_inbound()
        if self._http is not None and self._reconnecting is not None and self._state is AdapterState.DEGRADED:
            self._reconnecting = None
            self._set_state(AdapterState.RUNNING, f"HTTP events on {self._http.url} as @{self.bot_username}")

    # --- liveness and catching up ------------------------------------------------------------
    async def probe_liveness(self, points: Sequence[CatchUpPoint]) -> Liveness:
        if not self._receive and self._state is AdapterState.RUNNING:
            return Liveness(True, _SENDING_ONLY)
        if self._sink is None or self._history is None or self._state not in (AdapterState.RUNNING,
                                                                              AdapterState.DEGRADED):  # fmt: skip
            return Liveness(False, f"not connected ({self._state.value})")
        return await liveness.probe(self._client, self._socket, self._history, self._sink.received, points)

    async def reconnect(self, reason: str) -> None:
        if self._socket is None and self._http is None:
            raise AdapterError(f"the Slack adapter cannot reconnect: it is {self._state.value}")
        self._reconnecting = reason
        log.warning("slack.reconnect", reason=reason, mode=self._settings.mode)
        if self._socket is not None:
            self._set_state(AdapterState.DEGRADED, f"reconnecting Socket Mode: {reason}")
            self._socket.reconnect()
        else:  # Slack calls us: nothing to rebuild here; check the app's Event Subscriptions if it stays so
            self._set_state(AdapterState.DEGRADED, f"{reason}; waiting for Slack to call the events URL again")

    def _new_session(self, replaced: bool) -> None:
        """Slack greeted a Socket Mode session; when it ``replaced`` one, events sent while there was none are lost."""
        asked, self._reconnecting = self._reconnecting, None
        if not replaced:
            return
        reason = (f"Socket Mode reconnected on request ({asked})" if asked is not None
                  else "Socket Mode opened a new session; events sent in between are not delivered")  # fmt: skip
        if self._state is AdapterState.DEGRADED:
            self._set_state(AdapterState.RUNNING, f"Socket Mode as @{self.bot_username}")
        log.info("slack.socket.gap", reason=reason)
        self._report_gap(reason)

    async def catch_up(self, points: Sequence[CatchUpPoint], window: CatchUpWindow) -> list[InboundMessage]:
        if not self._receive:
            return []  # the gateway that holds the socket catches up
        if self._history is None or self._sink is None:
            raise AdapterError(f"the Slack adapter cannot catch up: it is {self._state.value}")
        found = await self._history.catch_up(points, window)
        for message in found:
            self._sink.received.add(message.event_id)  # handed over now: the next probe does not count it as missed
        return found

    # --- outbound --------------------------------------------------------------------------
    async def send(self, message: OutboundMessage) -> str:
        # chat.postMessage takes no idempotency key: when an earlier attempt may have landed, look first.
        found = await self._lookup.find(message) if message.maybe_sent and self._lookup is not None else None
        ts = found or await sending.post(self._client, message)
        self._joined(message)
        return ts

    def _joined(self, message: OutboundMessage) -> None:
        """The bot wrote into a channel thread: replies there continue without a mention."""
        if message.thread_id and self._threads is not None and not message.chat_id.startswith("D"):
            self._threads.remember(message.chat_id, message.thread_id)

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        try:
            await sending.update(self._client, chat_id, message_id, text, markup)
        except RecipientUnavailable as error:
            if not streaming.edit_refused(error):
                raise
            # Perhaps a stream left running (the process stopped before ending it): end it, edit again.
            log.info("slack.stream.stopped_for_edit", channel=chat_id, ts=message_id)
            try:
                await self.stop_stream(chat_id, message_id)
            except RecipientUnavailable:
                raise error  # no stream of ours: the edit's own refusal says what happened
            await sending.update(self._client, chat_id, message_id, text, markup)

    async def send_choice(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, thread_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        """Post ``text`` with a row of ``buttons`` (in ``thread_id``; Slack has no replies outside threads, so
        ``reply_to`` is not used)."""
        message = OutboundMessage(chat_id=chat_id, text=text, thread_id=thread_id)
        ts = await sending.post(self._client, message, blocks=choice_blocks(text, buttons))
        self._joined(message)
        return ts

    async def close_choice(self, chat_id: str, message_id: str, text: str) -> None:
        await sending.update(self._client, chat_id, message_id, text, Markup.PLAIN, blocks=closed_blocks(text))

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Slack offers bots no typing indicator in channels; nothing to do."""

    # --- files that came with a message ------------------------------------------------------
    async def fetch_media(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        return await self._files.fetch(attachment, max_bytes=max_bytes, timeout=timeout)

    # --- streaming -------------------------------------------------------------------------
    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        """Native streaming where the reply goes into a thread (every channel reply; a DM only inside a
        thread, such as an assistant thread): ``chat.startStream`` needs one. Top-level DM replies are
        posted, then updated."""
        return (StreamMode.NATIVE, StreamMode.EDIT) if thread_id else (StreamMode.EDIT,)

    async def start_stream(self, message: OutboundMessage, *, recipient_user_id: str | None = None) -> str:
        team = self._workspaces.team_of(recipient_user_id) if self._workspaces is not None else None
        ts = await streaming.start(self._client, message, recipient_user_id=recipient_user_id, recipient_team_id=team)
        if message.nonce:
            self._stream_nonces[(message.chat_id, ts)] = message.nonce
            while len(self._stream_nonces) > STREAM_NONCES:
                self._stream_nonces.popitem(last=False)
        self._joined(message)
        return ts

    async def append_stream(self, chat_id: str, message_id: str, text: str) -> None:
        await streaming.append(self._client, chat_id, message_id, text)

    async def stop_stream(self, chat_id: str, message_id: str) -> None:
        nonce = self._stream_nonces.get((chat_id, message_id))
        await streaming.stop(self._client, chat_id, message_id, nonce=nonce)
        self._stream_nonces.pop((chat_id, message_id), None)

    async def set_status(self, chat_id: str, thread_id: str | None, status: str) -> None:
        await streaming.set_status(self._client, chat_id, thread_id, status)


def _check(settings: SlackSettings) -> None:
    if not settings.bot_token:
        raise AdapterError("Slack needs a bot token: set SLACK_BOT_TOKEN or platforms.slack.bot_token (xoxb-…)")
    if settings.mode == "socket" and not settings.app_token:
        raise AdapterError(
            "Slack Socket Mode needs an app-level token: set SLACK_APP_TOKEN or platforms.slack.app_token (xapp-…), "
            "or use mode: http"
        )
    if settings.mode == "http" and not settings.signing_secret:
        raise AdapterError(
            "Slack HTTP mode needs the signing secret: set SLACK_SIGNING_SECRET or platforms.slack.signing_secret"
        )
    if not settings.listen_path.startswith("/"):
        raise AdapterError(f"platforms.slack.http_listen.path must start with '/', not {settings.listen_path!r}")
