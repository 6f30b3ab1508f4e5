"""One agent turn: model -> tools -> model ... until a reply or the step budget runs out.

Before every model call the context engine may compact the conversation. Tool
calls of one step run concurrently, each with a timeout; their results go back
to the model in call order, failures as text the model can read. A context-length
error forces a compaction and one retry. The turn is cancellable (``/stop``,
shutdown): calls already made get a stub result so the stored conversation
never holds a tool call without its answer.

A tool returns text or a :class:`agent.tools.ToolResult`; its pictures are kept through the
injected :class:`agent.media.MediaSink` and ride on the tool message as media parts, and a
failure's text is marked as one (:mod:`agent.tool_results`).

The bytes of the pictures and documents in the conversation are read before each
call through the injected :class:`agent.media.MediaSource`, once per turn
(:mod:`agent.turn_media`); what is gone is sent as a stand-in.

Every message the turn produces is handed to the observer as soon as it exists,
so the gateway can persist it before anything depends on it; while a model call
streams, the observer is shown its text so far (``on_text``), the compaction's
summary calls excepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import structlog

from agent.caching import Ttl
from agent.compressor import CompressionResult, ContextEngine
from agent.errors import ContextTooLongError, ModelUnavailableError
from agent.media import MediaSink, MediaSource
from agent.messages import ChatMessage, ToolCall, error_text
from agent.providers.base import ModelRequest, ModelResponse, ToolSpec
from agent.providers.router import ModelRouter
from agent.providers.text_feed import TextFeed
from agent.tool_results import tool_message
from agent.tools.registry import ToolResult
from agent.turn_media import TurnMedia
from agent.usage import PriceTable, Usage

log = structlog.get_logger("agent.loop")

BUDGET_NOTE = (
    "You have used every tool step this turn allows. Do not call tools now: answer the user with "
    "what you found or did so far, and say plainly what is left to do."
)
CANCELLED_RESULT = "(not run: the turn was stopped before this tool finished)"


class ToolBox(Protocol):
    """The tools a turn may call."""

    def specs(self) -> list[ToolSpec]: ...

    async def call(self, call: ToolCall) -> str | ToolResult: ...


class TurnObserver(Protocol):
    def on_text(self, text: str) -> None:
        """The model is writing: ``text`` is the whole visible text of the current attempt so far
        (the latest call wins; ``""`` withdraws an attempt that failed before a retry). Never thinking
        or tool-call arguments. A call that ends with tool calls is followed by ``on_message`` of its
        message; the next call's text starts afresh. Must not block; what it raises is logged, not
        raised. An observer without this method is shown nothing."""

    async def on_message(self, message: ChatMessage) -> None:
        """A new assistant or tool message exists (persist it)."""

    async def on_compaction(self, result: CompressionResult) -> None:
        """The conversation was compacted: ``result.messages`` replaces it (split the session)."""

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        """One model call finished (account its usage). A call that failed after the API had billed it
        (a stream cut mid-answer) comes too, with an empty message and ``stop_reason`` ``"failed"``."""


class NullObserver:
    def on_text(self, text: str) -> None:
        return None

    async def on_message(self, message: ChatMessage) -> None:
        return None

    async def on_compaction(self, result: CompressionResult) -> None:
        return None

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        return None


@dataclass(frozen=True, slots=True)
class LoopSettings:
    max_iterations: int = 90
    """Model calls with tools allowed in one turn."""
    tool_timeout: float = 120.0
    max_tokens: int = 4096


@dataclass
class TurnResult:
    reply: str
    history: list[ChatMessage]
    """The whole conversation after the turn (system prompt first)."""
    outcome: Literal["answered", "budget_exhausted"]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    model_calls: int = 0
    compactions: int = 0
    last_prompt_tokens: int = 0


class ToolLoop:
    def __init__(
        self,
        router: ModelRouter,
        engine: ContextEngine,
        tools: ToolBox,
        *,
        estimate: Callable[[ChatMessage], int],
        prices: PriceTable | None = None,
        settings: LoopSettings = LoopSettings(),
        media: MediaSource | None = None,
        pictures: MediaSink | None = None,
    ) -> None:
        """``media``: where the bytes of the conversation's pictures and documents are read (none: stand-ins);
        ``pictures``: where the pictures tools return are kept (none: a line in the result says they are not)."""
        self._router = router
        self._media = media
        self._pictures = pictures
        self._engine = engine
        self._tools = tools
        self._estimate = estimate
        self._prices = prices or PriceTable()
        self._settings = settings

    async def run(
        self,
        history: Sequence[ChatMessage],
        *,
        ephemeral: str | None = None,
        cache_ttl: Ttl | None = None,
        observer: TurnObserver | None = None,
        known_prompt_tokens: int | None = None,
    ) -> TurnResult:
        """Run a turn on ``history`` (system prompt first, the new user message last)."""
        turn = _Turn(self, list(history), ephemeral, cache_ttl, observer or NullObserver(), known_prompt_tokens)
        return await turn.run()


class _Turn:
    """The state of one running turn."""

    def __init__(
        self,
        loop: ToolLoop,
        history: list[ChatMessage],
        ephemeral: str | None,
        cache_ttl: Ttl | None,
        observer: TurnObserver,
        known_prompt_tokens: int | None,
    ) -> None:
        if not history or history[0].role != "system":
            raise ValueError("a turn's history starts with the system prompt")
        self.loop = loop
        self.history = history
        self.ephemeral = ephemeral
        self.cache_ttl = cache_ttl
        self.observer = observer
        # Observers written before streaming have no on_text: they are shown nothing.
        self.text = TextFeed(getattr(observer, "on_text", None))
        self.result = TurnResult(reply="", history=history, outcome="answered")
        self.media = TurnMedia(loop._media, ((t.style, t.sees_images) for t in loop._router.targets))
        # Prompt size: the last API-reported figure plus estimates of what was added since.
        self._reported = known_prompt_tokens
        # The previous reply and the new user message came after that figure was reported.
        self._added_since_report = sum(map(loop._estimate, history[-2:])) if known_prompt_tokens else 0

    async def run(self) -> TurnResult:
        settings = self.loop._settings
        for _ in range(settings.max_iterations):
            response = await self._call_model(self.loop._tools.specs(), self.ephemeral)
            await self._append(response.message)
            if not response.message.tool_calls:
                self.result.reply = response.message.content
                return self._finish("answered")
            await self._run_tools(response.message.tool_calls)
        log.warning("turn.budget_exhausted", iterations=settings.max_iterations)
        note = f"{self.ephemeral}\n\n{BUDGET_NOTE}" if self.ephemeral else BUDGET_NOTE
        response = await self._call_model(self.loop._tools.specs(), note, tools_off=True)
        await self._append(response.message)
        self.result.reply = response.message.content
        return self._finish("budget_exhausted")

    def _finish(self, outcome: Literal["answered", "budget_exhausted"]) -> TurnResult:
        self.result.outcome = outcome
        self.result.history = self.history
        return self.result

    def _prompt_tokens(self) -> int:
        if self._reported is not None:
            return self._reported + self._added_since_report
        return sum(self.loop._estimate(message) for message in self.history)

    async def _call_model(self, tools: list[ToolSpec], ephemeral: str | None, *, tools_off: bool = False) -> ModelResponse:
        await self._maybe_compact(force=False)
        self.text.next_call()
        try:
            response = await self._ask(tools, ephemeral, tools_off)
        except ContextTooLongError as error:
            log.warning("turn.context_too_long", error=str(error), tokens=self._prompt_tokens())
            if not await self._maybe_compact(force=True):
                raise ModelUnavailableError(_TOO_LONG, causes=[error]) from error
            try:
                response = await self._ask(tools, ephemeral, tools_off)
            except ContextTooLongError as again:
                raise ModelUnavailableError(_TOO_LONG, causes=[error, again]) from again
        await self._account(response)
        return response

    async def _ask(self, tools: list[ToolSpec], ephemeral: str | None, tools_off: bool) -> ModelResponse:
        """One model call on the history as it is now, its text shown to the observer as it comes."""
        media = await self.media.read(self.history)
        request = self._request(tools, ephemeral, tools_off, media)
        return await self.loop._router.complete(request, on_billed=self._billed, on_text=self.text)

    def _request(
        self, tools: list[ToolSpec], ephemeral: str | None, tools_off: bool, media: Mapping[str, bytes]
    ) -> ModelRequest:
        primary = self.loop._router.primary
        return ModelRequest(
            model=primary.model,
            system=self.history[0].content,
            messages=self.history[1:],
            tools=tools,
            tools_off=tools_off,
            max_tokens=self.loop._settings.max_tokens,
            cache_ttl=self.cache_ttl,
            ephemeral=ephemeral,
            media=media,
            vision=primary.sees_images,
        )

    async def _maybe_compact(self, *, force: bool) -> bool:
        engine = self.loop._engine
        tokens = self._prompt_tokens()
        if not force and not engine.should_compress(tokens):
            return False
        result = await engine.compress(self.history, current_tokens=tokens, force=force, must_fit=force)
        if not result.compacted:
            return False
        self.history = list(result.messages)
        self._reported, self._added_since_report = None, 0
        self.result.compactions += 1
        await self.observer.on_compaction(result)
        return True

    async def _account(self, response: ModelResponse) -> None:
        usage = response.usage
        self.result.model_calls += 1
        self.result.last_prompt_tokens = usage.prompt_tokens
        cost = self._add_cost(response.model, usage)
        self.loop._engine.update_from_usage(usage.prompt_tokens)
        self._reported, self._added_since_report = usage.prompt_tokens, 0
        await self.observer.on_model_call(response, cost)

    async def _billed(self, model: str, usage: Usage) -> None:
        """A model call failed after the API had billed it: its usage counts, the call does not."""
        cost = self._add_cost(model, usage)
        await self.observer.on_model_call(ModelResponse(ChatMessage.assistant(""), usage, "failed", model), cost)

    def _add_cost(self, model: str, usage: Usage) -> float | None:
        self.result.usage = self.result.usage + usage
        cost = self.loop._prices.cost(model, usage, cache_ttl=self.cache_ttl or "5m")
        if cost is not None:
            self.result.cost_usd = (self.result.cost_usd or 0.0) + cost
        return cost

    async def _append(self, message: ChatMessage) -> None:
        self.history.append(message)
        self._added_since_report += self.loop._estimate(message)
        await self.observer.on_message(message)

    async def _run_tools(self, calls: Sequence[ToolCall]) -> None:
        tasks = [asyncio.create_task(self._one_tool(call), name=f"tool:{call.name}") for call in calls]
        try:
            results = await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for call in calls:
                await self._append(ChatMessage.tool(call.id, CANCELLED_RESULT, call.name))
            raise
        for message in results:
            await self._append(message)

    async def _one_tool(self, call: ToolCall) -> ChatMessage:
        """The tool message answering ``call``: the tool's result, or what went wrong as an error result."""
        timeout = self.loop._settings.tool_timeout
        try:
            result: str | ToolResult = await asyncio.wait_for(self.loop._tools.call(call), timeout)
        except TimeoutError:
            log.warning("tool.timeout", tool=call.name, timeout_s=timeout)
            result = error_text(f"the {call.name} tool did not finish within {timeout:g} seconds")
        except Exception as error:  # noqa: BLE001 - a failing tool is reported to the model, not raised
            log.warning("tool.failed", tool=call.name, error=str(error))
            result = error_text(f"the {call.name} tool failed: {error}")
        return await tool_message(call, result, self.loop._pictures)


_TOO_LONG = (
    "This conversation has grown too long for the model, even after summarising it. "
    "Send /new to start a fresh conversation."
)
