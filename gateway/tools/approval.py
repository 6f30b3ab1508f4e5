"""Asking the person before a tool runs: a question with Allow and Deny buttons in the turn's chat.

A tool the configuration marks ``confirm`` (``tools.mcp_servers[].confirm``) calls
:meth:`Approvals.confirm` before it does anything. The question goes to the chat of the session's
running turn (:mod:`gateway.turn.running`), replying to the message the turn answers: the tool's
label, a short summary of the arguments (secrets masked, long values cut) and two buttons
(``Adapter.send_choice``). The turn waits for at most ``tools.confirm_timeout`` seconds. Only a press
by the person whose message the turn answers counts; anyone else's press in that chat, or a press of
a question already closed, is ignored and logged (``tool.confirm.press_ignored``). The question is
then closed by editing it (``Adapter.close_choice``: the buttons go) to say what happened, and the
tool either runs (``confirm`` returns None) or does not, and the model reads why:

* ``not run: Alice refused``, after a press of Deny;
* ``not run: nobody answered within 120 s``;
* on a platform without buttons (``Adapter.supports_buttons`` false), that the tool needs them.

``/stop`` (or a newer message that interrupts the turn) cancels the wait like the rest of the turn;
the question is closed as stopped. Each question's buttons carry a random token of their own, so a
press can only answer the question it was shown under, never a later one. Log lines:
``tool.confirm.asked``, ``tool.confirm.answered`` (``allowed=true|false``), ``tool.confirm.expired``,
``tool.confirm.stopped``; the arguments are never logged.

One gateway only: the press must reach the process whose turn waits. In cluster mode a press
received by another replica (the one holding the Telegram poller's lease, say) finds no open
question there and is ignored; the question then expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import structlog

from adapters.contract import Adapter, AdapterError, Button, ButtonPress, RateLimited
from agent import Tool, ToolContext
from gateway.delivery.budget import ChatBudget
from gateway.operations.redaction import MASK, redactor
from gateway.turn.running import RunningTurns, TurnOrigin

log = structlog.get_logger("gateway.tools")

T = TypeVar("T")

PREFIX: Final = "confirm"
"""Button ids are ``confirm:<token>:allow`` and ``confirm:<token>:deny``."""
_BUTTON: Final = re.compile(rf"^{PREFIX}:(?P<token>[A-Za-z0-9_-]{{8,40}}):(?P<choice>allow|deny)$")
VALUE_CHARS: Final = 80
"""Characters of one argument's value the question shows; a longer one is cut."""
MAX_ARGUMENTS: Final = 8
"""Arguments the question lists; the rest are counted."""
PATIENCE: Final = 30.0
"""Seconds of a platform's ``retry_after`` the question (or its closing edit) waits out once; longer is a failure."""
SECRET_NAME: Final = re.compile(r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|auth|credential|cookie|private[_-]?key)")
"""An argument whose name says it is a secret shows as masked, whatever its value looks like."""

Choice = Literal["allow", "deny"]


@dataclass(slots=True)
class _Question:
    """One question waiting for its answer."""

    tool: str
    origin: TurnOrigin
    answer: asyncio.Future[tuple[Choice, ButtonPress]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Approvals:
    """Asks before a tool runs (:meth:`confirm`) and takes the presses of every adapter (:meth:`on_button`)."""

    def __init__(
        self,
        adapters: Mapping[str, Adapter],
        turns: RunningTurns,
        *,
        timeout: float,
        budget: ChatBudget | None = None,
    ) -> None:
        """``timeout``: seconds a question waits (``tools.confirm_timeout``). ``budget``: the chats' rate budget
        the question and its closing edit wait for, like every other send."""
        self._adapters = adapters
        self._turns = turns
        self._timeout = timeout
        self._budget = budget
        self._open: dict[str, _Question] = {}
        """Questions waiting for a press, by their token."""

    @property
    def waiting(self) -> int:
        """How many questions wait for an answer now."""
        return len(self._open)

    async def confirm(self, context: ToolContext, tool: Tool, arguments: dict[str, Any]) -> str | None:
        """Ask the person of the session's running turn whether ``tool`` may run with ``arguments``.

        None: allowed, run it. Otherwise the text the model reads as the call's result (it was not run).
        """
        label = tool.label
        origin = self._turns.get(context.session_id)
        if origin is None:
            log.warning("tool.confirm.unasked", tool=label, session=context.session_id,
                        reason="no turn of this session is running, so there is nobody to ask")  # fmt: skip
            return f"not run: {label} needs the person's approval, and there was no chat to ask in"
        adapter = self._adapters.get(origin.platform)
        if adapter is None or not adapter.supports_buttons:
            log.info("tool.confirm.unasked", tool=label, platform=origin.platform, reason="the platform has no buttons")
            return (f"not run: {label} needs the person's approval with buttons under a message, and this chat "
                    f"({origin.platform}) cannot show them; tell them this tool cannot be used here")  # fmt: skip
        token = secrets.token_urlsafe(12)
        question = self._open[token] = _Question(label, origin)
        try:
            return await self._ask(adapter, token, question, arguments)
        finally:
            del self._open[token]

    async def on_button(self, press: ButtonPress) -> None:
        """A press of a button, from any adapter: the answer to an open question when it is one by the person asked."""
        found = _BUTTON.match(press.button_id)
        if found is None:
            log.info("tool.confirm.press_ignored", platform=press.platform, chat=press.chat_id, user=press.user_id,
                     reason="not a button of a question about a tool")  # fmt: skip
            return
        question = self._open.get(found["token"])
        if question is None or question.answer.done():
            log.info("tool.confirm.press_ignored", platform=press.platform, chat=press.chat_id, user=press.user_id,
                     reason="the question is closed (answered, expired or stopped) or unknown here")  # fmt: skip
            return
        origin = question.origin
        if (press.platform, press.chat_id) != (origin.platform, origin.chat_id):
            log.warning("tool.confirm.press_ignored", tool=question.tool, platform=press.platform, chat=press.chat_id,
                        user=press.user_id, reason="pressed in another chat than the question's")  # fmt: skip
            return
        if press.user_id != origin.user_id:
            log.info("tool.confirm.press_ignored", tool=question.tool, platform=press.platform, chat=press.chat_id,
                     user=press.user_id, asked=origin.user_id, reason="only the person asked may answer")  # fmt: skip
            return
        choice: Choice = "allow" if found["choice"] == "allow" else "deny"
        question.answer.set_result((choice, press))

    async def _ask(self, adapter: Adapter, token: str, question: _Question, arguments: dict[str, Any]) -> str | None:
        origin, label = question.origin, question.tool
        person = origin.user_name or f"user {origin.user_id}"
        details = summary(arguments)
        buttons = (Button(f"{PREFIX}:{token}:allow", "Allow", "primary"),
                   Button(f"{PREFIX}:{token}:deny", "Deny", "danger"))  # fmt: skip
        text = (f"May I run {label}?\n{details}\n\nOnly {person} can answer; no answer within "
                f"{self._timeout:g} s means no.")  # fmt: skip
        where = {"tool": label, "platform": origin.platform, "chat": origin.chat_id, "user": origin.user_id}
        try:
            message_id = await self._write(origin, lambda: adapter.send_choice(
                origin.chat_id, text, buttons, thread_id=origin.thread_id, reply_to=origin.message_id,
            ))  # fmt: skip
        except AdapterError as error:
            log.warning("tool.confirm.unsent", **where, error=str(error))
            return f"not run: the question asking {person} to allow {label} could not be sent ({error})"
        log.info("tool.confirm.asked", **where, timeout_s=self._timeout)
        try:
            choice, press = await asyncio.wait_for(question.answer, self._timeout)
        except TimeoutError:
            log.info("tool.confirm.expired", **where, timeout_s=self._timeout)
            expired = f"{label}: no answer within {self._timeout:g} s, not run.\n{details}"
            await self._close(adapter, origin, message_id, expired)
            return f"not run: nobody answered within {self._timeout:g} s"
        except asyncio.CancelledError:
            stopped = origin.stopping
            log.info("tool.confirm.stopped", **where, reason="the turn was stopped" if stopped
                     else "the tool call was given up (agent.tool_timeout) before an answer")  # fmt: skip
            ending = "the reply was stopped" if stopped else "the tool call timed out before an answer"
            await self._close(adapter, origin, message_id, f"{label}: {ending}, not run.\n{details}")
            raise
        allowed = choice == "allow"
        name = press.user_name or person
        log.info("tool.confirm.answered", **where, allowed=allowed)
        verdict = f"allowed by {name}" if allowed else f"refused by {name}, not run"
        await self._close(adapter, origin, message_id, f"{label}: {verdict}.\n{details}")
        return None if allowed else f"not run: {name} refused"

    async def _close(self, adapter: Adapter, origin: TurnOrigin, message_id: str, text: str) -> None:
        """Edit the question to say what happened (its buttons go); a failure is logged, nothing more."""
        try:
            await self._write(origin, lambda: adapter.close_choice(origin.chat_id, message_id, text))
        except AdapterError as error:
            log.warning("tool.confirm.close_failed", platform=origin.platform, chat=origin.chat_id, error=str(error),
                        hint="the question keeps its buttons; pressing them now changes nothing")  # fmt: skip

    async def _write(self, origin: TurnOrigin, call: Callable[[], Awaitable[T]]) -> T:
        """One call to the question's chat in its turn of the rate budget; a ``retry_after`` of up to
        :data:`PATIENCE` seconds is waited out once (the chat held meanwhile), then the call is made again."""
        for attempt in (1, 2):
            try:
                budget = self._budget
                async with budget.write(origin.platform, origin.chat_id) if budget else contextlib.nullcontext():
                    return await call()
            except RateLimited as error:
                if attempt == 2 or error.retry_after > PATIENCE:
                    raise
                if self._budget is not None:
                    self._budget.hold(origin.platform, origin.chat_id, error.retry_after)
                else:
                    await asyncio.sleep(error.retry_after)
        raise AssertionError("unreachable: the second attempt returns or raises")


def summary(arguments: Mapping[str, Any]) -> str:
    """The arguments as short ``name: value`` lines for a person: secrets masked, long values cut."""
    if not arguments:
        return "(no arguments)"
    lines = []
    for name, value in list(arguments.items())[:MAX_ARGUMENTS]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        shown = MASK if SECRET_NAME.search(str(name)) else redactor(" ".join(shown.split()))  # masked before it is cut
        lines.append(f"{_cut(redactor(str(name)), 40)}: {_cut(shown, VALUE_CHARS)}")
    if len(arguments) > MAX_ARGUMENTS:
        lines.append(f"(and {len(arguments) - MAX_ARGUMENTS} more)")
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
