"""The agent as the gateway sees it: sessions that take turns.

:class:`Agent` holds what every session shares (the model routers, the tool
registry, the memory store, settings). :meth:`Agent.open_session` gives an
:class:`AgentSession` for one conversation: its frozen system prompt, its
compressor (with its back-off state and previous summary), its cache-TTL
advisor and its bound tools. The gateway keeps sessions while they are active
and reopens them from storage after a restart, passing back the stored
system-prompt snapshot and tool list so the cached prefix stays byte-identical.

A session's tools are fixed when it starts (:mod:`agent.tools.offer`): :meth:`Agent.offer`
picks them from the registry (all of them, or the names the caller allows the session's
person), :meth:`Agent.build_prompt` speaks of those and no others, and :meth:`Agent.open_session`
offers the model exactly those specs on every call, whatever the registry holds by then.

The agent knows nothing of platforms' libraries or of the database: the
platform is a name, the search function, the home directory and where the bytes
of users' pictures and documents are read (a :class:`agent.media.MediaSource`) are passed in,
and so is whose memory a session uses (a :class:`agent.memory_scopes.MemoryScope`
the gateway chooses; the same scope when a session is reopened), which also keeps
the session's search to that person's or conversation's past conversations.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import itertools
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.caching import Ttl, TtlAdvisor
from agent.compressor import CompressionResult, ContextCompressor
from agent.context_window import context_length
from agent.identity import seed_soul
from agent.loop import LoopSettings, ToolLoop, TurnObserver, TurnResult
from agent.media import MediaSink, MediaSource
from agent.memory_scopes import MemoryBank, MemoryScope
from agent.messages import ChatMessage
from agent.prompt import PromptInputs, SystemPrompt, build_system_prompt
from agent.providers.router import ModelRouter
from agent.summarizer import ModelSummarizer
from agent.tokens import estimate_message
from agent.providers.base import ToolSpec
from agent.tools import ScopedSearchFunction, SearchFunction, ToolContext, ToolRegistry, default_registry
from agent.tools.offer import SessionTools, offered
from agent.usage import PriceTable


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    home: Path
    """The Switchboard home (SOUL.md, memories/)."""
    context_length: int | None = None
    """Override of the model's window; None: the built-in table."""
    compression_enabled: bool = True
    threshold: float = 0.50
    target_ratio: float = 0.20
    protect_last_n: int = 20
    cache_ttl: Literal["5m", "1h", "auto"] = "auto"
    max_tokens: int = 4096
    max_iterations: int = 90
    tool_timeout: float = 120.0
    system_message: str | None = None
    workdir: Path | None = None


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        router: ModelRouter,
        *,
        summary_router: ModelRouter | None = None,
        search: ScopedSearchFunction | None = None,
        tools: ToolRegistry | None = None,
        prices: PriceTable | None = None,
        media: MediaSource | None = None,
        pictures: MediaSink | None = None,
    ) -> None:
        """``media``: where the bytes of users' pictures and documents are read (the gateway's media
        folder); None sends every part as a stand-in. ``pictures``: where the pictures tools return
        are kept (the same folder, after the downscaling users' photos get); None: a line in the
        tool's result says they are not shown."""
        self.settings = settings
        self.router = router
        self._summary_router = summary_router or router
        self._summarizer = ModelSummarizer(self._summary_router)
        self._search = search
        self.tools = tools or default_registry(session_search=search is not None)
        self.prices = prices or PriceTable()
        self._media = media
        self._pictures = pictures
        primary = router.primary
        self.vision = primary.sees_images
        """Whether the main model reads images (a session's pictures are stand-ins otherwise)."""
        self.estimate: Callable[[ChatMessage], int] = functools.partial(
            estimate_message, style=primary.style, vision=self.vision
        )
        """Token estimates of messages as the main model counts them (its pictures, its PDFs)."""
        self.memories = MemoryBank(settings.home / "memories")
        self.window = context_length(router.primary.model, settings.context_length)
        seed_soul(settings.home)

    async def aclose(self) -> None:
        """Close every provider's HTTP client."""
        providers = {id(t.provider): t.provider for r in (self.router, self._summary_router) for t in r.targets}
        for provider in providers.values():
            await provider.aclose()

    def offer(self, names: Collection[str] | None = None) -> tuple[ToolSpec, ...]:
        """The tools a new session is offered: the registered ones named in ``names`` (None: every one),
        as they are now. Pass them to :meth:`build_prompt` and :meth:`open_session`, and store them
        with the session (:func:`agent.tools.offer.specs_json`)."""
        return offered(self.tools, names)

    def tool_label(self, name: str) -> str:
        """How people see the tool the model calls ``name`` (``github.search_issues``); the name itself
        when no registered tool has it."""
        tool = self.tools.get(name)
        return tool.label if tool is not None else name

    async def build_prompt(
        self,
        *,
        session_id: str,
        platform: str,
        started_at: dt.datetime,
        memory: MemoryScope | None,
        platform_hint: str = "",
        tools: Sequence[ToolSpec] | None = None,
    ) -> SystemPrompt:
        """The frozen system prompt of a new session (reads a few small files off the event loop).

        ``memory``: whose memory the session shows besides the shared layer; None for none.
        ``platform_hint``: what the model should know about the platform, from the caller; "" for none.
        ``tools``: the session's tools (:meth:`offer`); None: every registered one.
        """
        tool_names = tuple(spec.name for spec in tools) if tools is not None else self.tools.names()

        def build() -> SystemPrompt:  # in a worker thread: the memory snapshot reads files too
            inputs = PromptInputs(
                session_id=session_id,
                started_at=started_at,
                platform=platform,
                home=self.settings.home,
                tool_names=tool_names,
                system_message=self.settings.system_message,
                memory=self.memories.snapshot(memory) if "memory" in tool_names else None,
                skills_dir=self.settings.home / "skills",
                workdir=self.settings.workdir,
                platform_hint=platform_hint,
            )
            return build_system_prompt(inputs)

        return await asyncio.to_thread(build)

    def open_session(
        self,
        *,
        session_id: str,
        platform: str,
        memory: MemoryScope | None,
        user_times: Iterable[float] = (),
        tools: Sequence[ToolSpec] | None = None,
    ) -> AgentSession:
        """An agent session for one conversation; ``user_times`` are its stored user-message times.

        ``memory``: the scope the session's memory tool writes, the one its prompt was built with,
        and whose past conversations its session_search reads; None turns both off for the session.
        ``tools``: the specs the session was offered when it started (stored with it), sent on every
        call as they are; None (a session stored before tool lists were kept): the registry's tools
        as they are at each call.
        """
        s = self.settings
        compressor = ContextCompressor(
            self.window.tokens,
            threshold=s.threshold if s.compression_enabled else 1.0,
            target_ratio=s.target_ratio,
            protect_last_n=s.protect_last_n,
            summarizer=self._summarizer,
            estimate=self.estimate,
        )
        store = self.memories.store(memory) if memory is not None else None
        search = _bound(self._search, memory)
        context = ToolContext(session_id=session_id, platform=platform, memory=store, search=search)
        loop = ToolLoop(
            self.router,
            compressor,
            SessionTools(self.tools, context, tuple(tools) if tools is not None else None),
            estimate=self.estimate,
            prices=self.prices,
            settings=LoopSettings(max_iterations=s.max_iterations, tool_timeout=s.tool_timeout, max_tokens=s.max_tokens),
            media=self._media,
            pictures=self._pictures,
        )
        advisor = TtlAdvisor.from_timestamps(s.cache_ttl, user_times)
        return AgentSession(
            session_id,
            loop,
            compressor,
            advisor,
            caching=self.router.primary.cache.enabled,
            vision=self.vision,
            estimate=self.estimate,
        )


def _bound(search: ScopedSearchFunction | None, scope: MemoryScope | None) -> SearchFunction | None:
    """``search`` kept to ``scope``'s conversations, as the session_search tool calls it."""
    if search is None or scope is None:
        return None

    async def scoped(query: str, limit: int) -> list[dict[str, Any]]:
        return await search(query, limit, scope)

    return scoped


class AgentSession:
    """One conversation's agent state, kept across its turns."""

    def __init__(
        self,
        session_id: str,
        loop: ToolLoop,
        compressor: ContextCompressor,
        advisor: TtlAdvisor,
        *,
        caching: bool,
        vision: bool = True,
        estimate: Callable[[ChatMessage], int] = estimate_message,
    ) -> None:
        self.session_id = session_id
        self.vision = vision
        """Whether the session's main model reads images: without, its pictures go as stand-ins
        (the gateway tells the user once)."""
        self.compressor = compressor
        self._loop = loop
        self._advisor = advisor
        self._caching = caching
        self._lock = asyncio.Lock()
        self._new_share = NewShare(estimate)

    async def run_turn(
        self,
        history: Sequence[ChatMessage],
        *,
        user_time: float,
        observer: TurnObserver | None = None,
        ephemeral: str | None = None,
        known_prompt_tokens: int | None = None,
    ) -> TurnResult:
        """One turn on ``history`` (the frozen system prompt first, the new user message last)."""
        async with self._lock:
            ttl = self._choose_ttl(history, user_time) if self._caching else None
            return await self._loop.run(
                history,
                ephemeral=ephemeral,
                cache_ttl=ttl,
                observer=observer,
                known_prompt_tokens=known_prompt_tokens,
            )

    def _choose_ttl(self, history: Sequence[ChatMessage], user_time: float) -> Ttl:
        advisor = self._advisor
        cold = advisor.is_cold(user_time)
        advisor.observe(user_time)
        ttl = advisor.choose(self._new_share(history), cold=cold)
        advisor.record_write(user_time, ttl)
        return ttl

    async def compact(
        self, history: Sequence[ChatMessage], *, focus: str | None = None, current_tokens: int | None = None
    ) -> CompressionResult:
        """Compact now (``/compress``, gateway hygiene), whatever the thresholds say.

        The one way into the session's compressor from outside a turn: it holds the session's lock,
        as :meth:`run_turn` (whose compactions happen inside) does, so a compaction never runs while
        another one, or a turn, is under way; it waits for it. ``current_tokens``: the prompt size
        the caller measured, when known.
        """
        async with self._lock:
            return await self.compressor.compress(list(history), current_tokens=current_tokens, focus=focus, force=True)


class NewShare:
    """The share of the prompt added since the previous user message: the last turn's tool
    traffic and reply, and the new message (for the TTL choice).

    The prompt's estimated size is kept across turns and only the messages added since are
    estimated: a history grows at its end, so a turn's cost does not grow with the session's
    length. When the history is not the one counted before plus
    new messages (its first or last counted message differs: a compaction rewrote it),
    everything is counted again.
    """

    def __init__(self, estimate: Callable[[ChatMessage], int] = estimate_message) -> None:
        self._estimate = estimate
        self._total = 0
        self._counted = 0
        self._first: ChatMessage | None = None
        self._last: ChatMessage | None = None

    def __call__(self, history: Sequence[ChatMessage]) -> float:
        n = self._counted
        continues = n <= len(history) and (n == 0 or (history[n - 1] == self._last and history[0] == self._first))
        if not continues:
            n, self._total = 0, 0
        self._total += sum(map(self._estimate, itertools.islice(history, n, None)))
        self._counted = len(history)
        self._first, self._last = (history[0], history[-1]) if history else (None, None)
        previous_user = next((i for i in range(len(history) - 2, -1, -1) if history[i].role == "user"), 0)
        added = sum(map(self._estimate, itertools.islice(history, previous_user + 1, None)))
        return min(1.0, added / (self._total or 1))
