"""A local Telegram Bot API server for tests: real long polling, real webhooks, real error answers.

Point aiogram at it with
``Bot(token, session=AiohttpSession(api=TelegramAPIServer.from_base(api.base_url)))``.
URLs are ``{base}/bot{token}/{method}``; parameters may come as a query, a
form or JSON. What it keeps is what Telegram keeps across a bot's crash: the
updates not yet confirmed (``getUpdates`` with ``offset=N`` confirms every
update below ``N``) and every message the bot sent.

The test side (see :mod:`.users` for injecting user messages):

* :attr:`TelegramAPI.sent` - the bot's messages in the order accepted;
  :meth:`TelegramAPI.wait_sent` waits for them.
* :attr:`TelegramAPI.calls` - every request, with its parameters and time;
  :attr:`TelegramAPI.answered` - the ones answered so far (a long poll is in
  ``calls`` but not here while it waits).
* :meth:`TelegramAPI.fail` - scripted error answers per method (429 with
  ``retry_after``, 5xx, a markup the server "cannot parse", a broken proxy's HTML page).
* :attr:`TelegramAPI.conflict` - answer ``getUpdates`` with 409, as when a
  second instance polls the same token; :meth:`TelegramAPI.stall` - hold
  ``getUpdates`` requests open without answering until :meth:`unstall`.
* :meth:`TelegramAPI.deafen` - a connection that looks healthy but hears nothing: ``getUpdates``
  answers (after its long poll) as if no update waited, while updates pile up and getWebhookInfo
  counts them, until the poller comes back on a new connection or :meth:`TelegramAPI.undeafen`.
* :attr:`TelegramAPI.commands` - the command menu per scope type, as ``setMyCommands`` set it.
* Drafts (``sendMessageDraft``, private chats only): :attr:`TelegramAPI.drafts`;
  :attr:`TelegramAPI.drafts_available` False answers 404 "method not found", as an older
  or local Bot API server does. :attr:`TelegramAPI.screen` (see :mod:`.screen`) has every
  message, edit and draft the user saw, with its time.
* Flood control (see :mod:`.flood`): off unless :meth:`TelegramAPI.enforce_rates` (or
  ``TelegramAPI(rates=True)``, ``--rates`` on the command line) turns it on; the existing
  tests send faster than Telegram allows. :attr:`TelegramAPI.rate_limited` counts the
  429 answers sent, scripted ones included. ``GET /_test/shown`` serves both to another process.
* Webhooks and their failures: see :mod:`.webhooks`.
* Files users send (``getFile`` and ``/file/bot<token>/<path>`` downloads, with faults on demand) and
  the photo, document, voice, audio and album messages that carry them: see :mod:`.files` and :mod:`.media`.
* Buttons under the bot's messages (inline keyboards), people pressing them and the bot's
  ``answerCallbackQuery``: see :mod:`.keyboards`; :attr:`BotMessage.keyboard` is what a message shows now.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .builders import Chat, User
from .flood import COUNTED, FloodControl
from .html_check import ParseError, parse_html, utf16_length
from .keyboards import Keyboard, KeyboardSide, read_keyboard
from .media import MediaSide
from .screen import Screen, Shown
from .webhooks import WebhookSide
from .wire import Failure, as_bool, as_int, as_json, error, failure, ok, read_params

MAX_LENGTH = 4096
COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
CONFLICT_POLLING = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
CONFLICT_WEBHOOK = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
DRAFT_PEER_INVALID = "Bad Request: TEXTDRAFT_PEER_INVALID"
"""What the Bot API answers a draft for a chat that is not a private chat."""
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly the same "
    "as a current content and reply markup of the message"
)


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float
    """time.monotonic() when the request arrived."""
    client_port: int
    """The caller's TCP port: a new value means a new connection."""
    via: str = ""
    """The first path segment of a base URL with a path (``{base}/{via}/bot{token}/...``): which of several
    clients (gateway processes) called, when each was given its own."""


@dataclass(slots=True)
class BotMessage:
    chat_id: int
    message_id: int
    text: str
    parse_mode: str | None
    visible: str
    """What the user sees: the text with the markup applied."""
    thread_id: int | None
    reply_to: int | None
    at: float
    edits: list[str] = field(default_factory=list)
    keyboard: Keyboard | None = None
    """The inline keyboard the message shows now (rows of buttons), None for none."""


class TelegramAPI(MediaSide, WebhookSide, KeyboardSide):
    def __init__(
        self, token: str = "123456789:TEST-token", host: str = "127.0.0.1", port: int = 0, *, rates: bool = False
    ) -> None:
        super().__init__()
        self.token = token
        self.host = host
        self.port = port
        self.bot = User(id=int(token.split(":")[0]), first_name="Switchboard", username="switchboard_test_bot", is_bot=True)
        self.sent: list[BotMessage] = []
        self.calls: list[Call] = []
        self.answered: list[Call] = []
        self.actions: list[tuple[int, str, int | None]] = []
        self.conflict = False
        self.deaf = False
        """True while :meth:`deafen` holds (see there)."""
        self._deaf_connection: int | None = None
        self._deaf_stays = False
        self.commands: dict[str, list[tuple[str, str]]] = {}
        """Per scope type (``all_private_chats``, ``all_group_chats``, ``default``...): (command, description) pairs."""
        self.blocked: set[int] = set()
        self.screen = Screen()
        self.drafts_available = True
        """False: ``sendMessageDraft`` is answered 404 "method not found", as by a Bot API server before drafts."""
        self.rate_limited = 0
        """How many 429 answers were sent (flood control's and scripted ones)."""
        self.flood: FloodControl | None = FloodControl() if rates else None
        self._failures: dict[str, list[Failure]] = {}
        self._poll_generation = itertools.count(1)
        self._current_poll = 0
        self._unstalled = asyncio.Event()
        self._unstalled.set()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._pusher: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("*", "/{via}/bot{token}/{method}", self._handle)
        self.add_control_routes(app)
        self.add_file_routes(app)
        app.router.add_get("/_test/shown", self._control_shown)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._pusher = asyncio.create_task(self._push_webhooks(), name="fake-telegram-webhook")

    async def stop(self) -> None:
        self._closing = True
        self._unstalled.set()
        self.release_hung_downloads()
        async with self.changed:
            self.changed.notify_all()
        if self._pusher is not None:
            self._pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pusher
        if self._runner is not None:
            await self._runner.cleanup()

    # --- test controls -----------------------------------------------------------------------
    def fail(self, method: str, *failures: Failure) -> None:
        """Answer the next calls of ``method`` with these errors, one each, in order."""
        self._failures.setdefault(method, []).extend(failures)

    def enforce_rates(self, on: bool = True, *, grace: float = 0.2) -> None:
        """Answer calls beyond Telegram's published limits with 429 and ``retry_after`` (see :mod:`.flood`);
        ``on=False`` turns it off again."""
        self.flood = FloodControl(grace=grace) if on else None

    @property
    def drafts(self) -> list[Shown]:
        """Every draft accepted, in order."""
        return self.screen.drafts

    def stall(self) -> None:
        self._unstalled.clear()

    def deafen(self, *, until_undeafened: bool = False) -> None:
        """From now on ``getUpdates`` on the poller's current connection answers empty (after its timeout)
        while updates wait; a ``getUpdates`` on another connection (the poller reconnected) ends it, unless
        ``until_undeafened`` (the fault is Telegram's: only :meth:`undeafen` ends it)."""
        polls = self.calls_to("getUpdates")
        self.deaf, self._deaf_connection = True, polls[-1].client_port if polls else None
        self._deaf_stays = until_undeafened

    async def undeafen(self) -> None:
        async with self.changed:
            self.deaf = False
            self.changed.notify_all()

    def unstall(self) -> None:
        self._unstalled.set()

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def sent_to(self, chat_id: int) -> list[BotMessage]:
        return [message for message in self.sent if message.chat_id == chat_id]

    async def wait_sent(self, count: int, *, where: Callable[[BotMessage], bool] = lambda m: True,
                        timeout: float = 60.0) -> list[BotMessage]:  # fmt: skip
        """Wait until ``count`` bot messages match ``where`` (the timeout only stops a hang)."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len([m for m in self.sent if where(m)]) >= count), timeout)
        return [m for m in self.sent if where(m)]

    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float = 60.0) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(predicate), timeout)

    async def _control_shown(self, request: web.Request) -> web.Response:
        """What users saw (for an emulator in another process: ``at`` is that machine's monotonic clock)."""
        shown = [{"chat_id": e.chat_id, "kind": e.kind, "visible": e.visible, "at": e.at, "message_id": e.message_id,
                  "draft_id": e.draft_id} for e in self.screen.shown]  # fmt: skip
        return web.json_response({"shown": shown, "rate_limited": self.rate_limited})

    # --- the Bot API -------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await read_params(request)
        async with self.changed:
            call = Call(method, params, time.monotonic(), _client_port(request), request.match_info.get("via", ""))
            self.calls.append(call)
            self.changed.notify_all()
        response = await self._answer(request, method, params)
        async with self.changed:
            self.rate_limited += response.status == 429
            self.answered.append(call)
            self.changed.notify_all()
        return response

    async def _answer(self, request: web.Request, method: str, params: dict[str, Any]) -> web.Response:
        if request.match_info["token"] != self.token:
            return error(401, "Unauthorized")
        scripted = self._failures.get(method)
        lost = bool(scripted) and scripted[0].answer_lost
        if scripted and not lost:
            return failure(scripted.pop(0), request.path)
        if lost:
            scripted.pop(0)
            answer = await self._answer(request, method, params)  # carried out; its answer is lost
            assert request.transport is not None
            request.transport.close()
            return answer
        handler = getattr(self, f"_api_{method.lower()}", None)
        if handler is None or (method.lower() == "sendmessagedraft" and not self.drafts_available):
            return error(404, "Not Found: method not found")
        if method.lower() in ("getupdates", "setwebhook"):
            self.note_allowed_updates(params)
        if method.lower() == "getupdates":
            return await self._api_getupdates(params, _client_port(request))
        if self.flood is not None and method.lower() in COUNTED:
            retry_after = self.flood.admit(as_int(params.get("chat_id")) or 0, time.monotonic())
            if retry_after is not None:
                return error(429, f"Too Many Requests: retry after {retry_after}", retry_after)
        return await handler(params)

    async def _api_getme(self, params: dict[str, Any]) -> web.Response:
        return ok({**self.bot.to_json(), "can_join_groups": True, "can_read_all_group_messages": False,
                   "supports_inline_queries": False})  # fmt: skip

    async def _api_getupdates(self, params: dict[str, Any], connection: int = 0) -> web.Response:
        if self.conflict:
            return error(409, CONFLICT_POLLING)
        if self.webhook is not None:
            return error(409, CONFLICT_WEBHOOK)
        offset, limit = as_int(params.get("offset")), as_int(params.get("limit")) or 100
        timeout = min(float(params.get("timeout") or 0), 50.0)
        mine = self._current_poll = next(self._poll_generation)
        async with self.changed:
            if offset is not None:
                self.acknowledge_below(offset)
        await self._unstalled.wait()
        if self.deaf and self._deaf_connection is None:
            self._deaf_connection = connection
        elif self.deaf and connection != self._deaf_connection and not self._deaf_stays:
            self.deaf = False  # the poller came back on a new connection, which hears again
        async with self.changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: (bool(self.updates) and not self.deaf) or self._current_poll != mine
                                          or self._closing),
                    timeout,
                )  # fmt: skip
            if self._current_poll != mine:
                return error(409, CONFLICT_POLLING)
            return ok([] if self.deaf else list(self.updates[:limit]))

    async def _api_setmycommands(self, params: dict[str, Any]) -> web.Response:
        commands, scope = as_json(params.get("commands")), as_json(params.get("scope")) or {"type": "default"}
        if not isinstance(commands, list) or not isinstance(scope, dict) or "type" not in scope:
            return error(400, "Bad Request: can't parse commands or scope JSON")
        if len(commands) > 100:
            return error(400, "Bad Request: too many commands")
        menu = []
        for command in commands:
            name, description = str(command.get("command", "")), str(command.get("description", ""))
            if not COMMAND_NAME.fullmatch(name):
                return error(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(description.strip()) <= 256:
                return error(400, "Bad Request: command description must be 1-256 characters")
            menu.append((name, description))
        async with self.changed:
            self.commands[str(scope["type"])] = menu
            self.changed.notify_all()
        return ok(True)

    async def _api_sendchataction(self, params: dict[str, Any]) -> web.Response:
        chat = self.chats.get(as_int(params.get("chat_id")) or 0)
        if chat is None:
            return error(400, "Bad Request: chat not found")
        async with self.changed:
            self.actions.append((chat.id, str(params.get("action")), as_int(params.get("message_thread_id"))))
            self.changed.notify_all()
        return ok(True)

    async def _api_sendmessage(self, params: dict[str, Any]) -> web.Response:
        chat = self.chats.get(as_int(params.get("chat_id")) or 0)
        if chat is None:
            return error(400, "Bad Request: chat not found")
        if chat.id in self.blocked:
            return error(403, "Forbidden: bot was blocked by the user")
        text, parse_mode = str(params.get("text") or ""), params.get("parse_mode") or None
        visible, problem = _render(text, parse_mode)
        keyboard, refused = read_keyboard(params)
        problem = problem or refused
        if problem:
            return problem
        thread_id = as_int(params.get("message_thread_id"))
        if thread_id is not None and thread_id not in chat.topics:
            return error(400, "Bad Request: message thread not found")
        reply_to = self._reply_target(chat, params)
        if reply_to == -1:
            return error(400, "Bad Request: message to be replied not found")
        async with self.changed:
            message = BotMessage(chat.id, self.next_message_id(chat.id), text, parse_mode, visible, thread_id,
                                 reply_to, time.monotonic(), keyboard=keyboard)  # fmt: skip
            self.sent.append(message)
            self.screen.record(Shown(chat.id, "message", text, parse_mode, visible, message.at,
                                     message_id=message.message_id, thread_id=thread_id))  # fmt: skip
            self.changed.notify_all()
        return ok(self._message_json(chat, message))

    async def _api_sendmessagedraft(self, params: dict[str, Any]) -> web.Response:
        chat = self.chats.get(as_int(params.get("chat_id")) or 0)
        if chat is None:
            return error(400, "Bad Request: chat not found")
        if chat.type != "private":
            return error(400, DRAFT_PEER_INVALID)
        if chat.id in self.blocked:
            return error(403, "Forbidden: bot was blocked by the user")
        draft_id = as_int(params.get("draft_id"))
        if not draft_id:
            return error(400, "Bad Request: draft_id must be a non-zero number")
        text, parse_mode = str(params.get("text") or ""), params.get("parse_mode") or None
        visible, problem = _render(text, parse_mode, empty_allowed=True)
        if problem:
            return problem
        thread_id = as_int(params.get("message_thread_id"))
        if thread_id is not None and thread_id not in chat.topics:
            return error(400, "Bad Request: message thread not found")
        async with self.changed:
            self.screen.record(Shown(chat.id, "draft", text, parse_mode, visible, time.monotonic(), draft_id=draft_id,
                                     thread_id=thread_id))  # fmt: skip
            self.changed.notify_all()
        return ok(True)

    async def _api_editmessagetext(self, params: dict[str, Any]) -> web.Response:
        chat_id, message_id = as_int(params.get("chat_id")), as_int(params.get("message_id"))
        found = next((m for m in self.sent if m.chat_id == chat_id and m.message_id == message_id), None)
        if found is None:
            return error(400, "Bad Request: message to edit not found")
        text, parse_mode = str(params.get("text") or ""), params.get("parse_mode") or None
        visible, problem = _render(text, parse_mode)
        keyboard, refused = read_keyboard(params)  # none given: Telegram removes the one the message had
        problem = problem or refused
        if problem:
            return problem
        if (_appearance(text, parse_mode, visible), keyboard) == (
            _appearance(found.text, found.parse_mode, found.visible), found.keyboard
        ):
            return error(400, NOT_MODIFIED)
        async with self.changed:
            found.edits.append(text)
            found.text, found.parse_mode, found.visible, found.keyboard = text, parse_mode, visible, keyboard
            self.screen.record(Shown(found.chat_id, "edit", text, parse_mode, visible, time.monotonic(),
                                     message_id=found.message_id, thread_id=found.thread_id))  # fmt: skip
            self.changed.notify_all()
        return ok({**self._message_json(self.chats[found.chat_id], found), "edit_date": int(time.time())})

    def _reply_target(self, chat: Chat, params: dict[str, Any]) -> int | None:
        """The message id replied to, None for no reply, -1 for a missing one that must exist."""
        reply = as_json(params.get("reply_parameters"))
        if isinstance(reply, dict):
            target, lenient = as_int(reply.get("message_id")), as_bool(reply.get("allow_sending_without_reply"))
        else:
            target, lenient = as_int(params.get("reply_to_message_id")), False
        if target is None or (chat.id, target) in self.message_ids:
            return target
        return None if lenient else -1

    def _message_json(self, chat: Chat, message: BotMessage) -> dict[str, Any]:
        data: dict[str, Any] = {"message_id": message.message_id, "date": int(time.time()), "chat": chat.to_json(),
                                "from": self.bot.to_json(), "text": message.visible}  # fmt: skip
        if message.thread_id is not None:
            data.update(message_thread_id=message.thread_id, is_topic_message=True)
        if message.keyboard is not None:
            data["reply_markup"] = {"inline_keyboard": message.keyboard}
        return data


def _client_port(request: web.Request) -> int:
    """The caller's TCP port (a new one means a new connection), 0 where unknown."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return int(peer[1]) if peer else 0


def _appearance(text: str, parse_mode: str | None, visible: str) -> tuple[str, str]:
    """What decides "not modified": the visible text and its formatting (none without a parse mode)."""
    return visible, text if parse_mode else visible


def _render(text: str, parse_mode: str | None, *, empty_allowed: bool = False) -> tuple[str, web.Response | None]:
    """The visible text, or Telegram's error answer for bad markup, an empty (unless ``empty_allowed``: a
    draft's placeholder) or a too long text."""
    if not text.strip() and not (empty_allowed and not text):
        return "", error(400, "Bad Request: message text is empty")
    visible = text
    if parse_mode is not None:
        if parse_mode.upper() != "HTML":
            return "", error(400, f"Bad Request: unsupported parse_mode {parse_mode!r} in this emulator")
        try:
            visible = parse_html(text)
        except ParseError as problem:
            return "", error(400, f"Bad Request: can't parse entities: {problem}")
    if utf16_length(visible) > MAX_LENGTH:
        return "", error(400, "Bad Request: message is too long")
    return visible, None
