"""Conversations: which stored session a message continues, and when one starts afresh.

A routing key (:mod:`gateway.inbound.session_key`) has at most one open session. The
reset policy (``sessions.reset``) ends it after ``idle_minutes`` of silence or
at ``daily_hour`` each day; ``/new`` ends it on request. A new session gets
its system prompt built once and stored; afterwards that stored snapshot is
used byte for byte, also after a restart.

The prompt holds a snapshot of the session's memory (:mod:`gateway.turn.memory_scope`),
so a session also ends, at its next message, when that snapshot must not be shown
any more: ``forgotten`` when its memory was deleted (``/forget``) after it started,
``memory_scope`` when an earlier version built it with the one global memory that
everyone shared, or stored a DM without its user.

Each open session has an :class:`agent.core.AgentSession` (compressor state,
cache-TTL advisor) and its history as the agent's messages; for the most
recently used sessions both are kept, so a turn converts and estimates only
the messages stored since the previous one, not the whole history. The rest
are rebuilt from storage when needed. In cluster mode a replica forgets them when it lets go of
the session (:meth:`Conversations.forget`): another replica may take turns of it meanwhile.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import structlog

from agent import Agent, AgentSession, ChatMessage, holds_legacy_memory
from config.models import SessionsConfig
from gateway.turn.convert import to_chat, to_new
from gateway.turn.memory_scope import scope_for_key, scope_for_record
from gateway.inbound.session_key import SessionKey
from storage import MessageRecord, SessionRecord, StorageEngine, new_session_id

log = structlog.get_logger("gateway.sessions")

MAX_CACHED_AGENT_SESSIONS = 4096
"""Conversations whose agent state and converted history stay in memory, least recently used out.

Sized for a busy gateway: with more sessions taking turns than this, every turn rebuilds its
agent state and converts its whole history again. An entry is a few KB plus one small object
per message (the text itself is shared with the store's cache).
"""


@dataclass(slots=True)
class _History:
    """A session's history as the agent's messages, as far as it was converted."""

    system_prompt: str
    messages: list[ChatMessage]
    """The system prompt's message, then one per stored record converted so far."""
    last_record_id: int | None


@dataclass(frozen=True, slots=True)
class Conversation:
    """An open session and its history, ready for a turn."""

    record: SessionRecord
    history: list[ChatMessage]
    """The system prompt first, then the stored messages."""
    records: list[MessageRecord]
    reset_reason: str | None = None
    """Why the previous session of this key just ended, when it did ("idle", "daily")."""


class Conversations:
    def __init__(
        self,
        store: StorageEngine,
        agent: Agent,
        settings: SessionsConfig,
        *,
        clock: Callable[[], float] = time.time,
        platform_hint: Callable[[str], str] = lambda platform: "",
        tool_offer: Callable[[SessionKey], Collection[str] | None] = lambda key: None,
    ) -> None:
        """``platform_hint``: the text a new session's prompt ends with, for its platform
        (:class:`gateway.turn.platform_hints.PlatformHints`). ``tool_offer``: the names of the tools a new
        session of a key is offered (:class:`gateway.tools.access.ToolAccess`); None: every registered tool."""
        self._store = store
        self._agent = agent
        self._settings = settings
        self._clock = clock
        self._platform_hint = platform_hint
        self._tool_offer = tool_offer
        self._agents: OrderedDict[str, AgentSession] = OrderedDict()
        self._histories: OrderedDict[str, _History] = OrderedDict()

    async def open(self, key: SessionKey) -> Conversation:
        """The session a new message of ``key`` continues, starting a new one when needed."""
        record = await self._store.find_open_session(str(key))
        reason = None
        if record is not None:
            records = await self._store.load_messages(record.id, last_seq=record.message_count)
            reason = self.expired(record, records) or self.memory_outdated(record)
            if reason is None:
                return self._conversation(record, records)
            await self.end(record, reason)
        record = await self.start(key)
        return self._conversation(record, [], reset_reason=reason)

    async def start(self, key: SessionKey) -> SessionRecord:
        now = self._clock()
        session_id = new_session_id(now)
        started = dt.datetime.fromtimestamp(now, tz=dt.timezone.utc)
        prompt = await self._agent.build_prompt(
            session_id=session_id, platform=key.platform, started_at=started, memory=scope_for_key(key),
            platform_hint=self._platform_hint(key.platform),
        )  # fmt: skip
        for notice in prompt.notices:
            log.warning("prompt.notice", session=session_id, notice=notice)
        record = await self._store.create_session(
            session_id=session_id,
            session_key=str(key),
            platform=key.platform,
            chat_id=key.chat_id,
            chat_type=key.chat_type.value,
            thread_id=key.thread_id,
            user_id=key.user_id,
            model=self._agent.router.primary.model,
            system_prompt=prompt.text,
        )
        log.info("session.started", session=record.id, session_key=str(key), prompt=prompt.fingerprint)
        return record

    async def end(self, record: SessionRecord, reason: str) -> None:
        if await self._store.end_session(record.id, reason):
            log.info("session.ended", session=record.id, reason=reason)
        self._agents.pop(record.id, None)
        self._histories.pop(record.id, None)

    async def reset(self, key: SessionKey, reason: str = "user") -> SessionRecord | None:
        """End the open session of ``key`` (``/new``); the next message starts a new one."""
        record = await self._store.find_open_session(str(key))
        if record is not None:
            await self.end(record, reason)
        return record

    async def split(self, record: SessionRecord, messages: Sequence[ChatMessage]) -> SessionRecord:
        """Persist a compaction: the parent ends with 'compression', a child holds the compacted list."""
        system, rest = messages[0], messages[1:]
        child = await self._store.split_session(record.id, [to_new(m) for m in rest], system_prompt=system.content)
        session = self._agents.pop(record.id, None)
        if session is not None:
            self._agents[child.id] = session
        self._histories.pop(record.id, None)
        log.info("session.split", parent=record.id, child=child.id, messages=len(rest), title=child.title)
        return child

    async def forget(self, key: str) -> None:
        """Drop what is kept in memory of the open session of ``key`` (another replica may work on it next)."""
        record = await self._store.find_open_session(key)
        if record is not None:
            self._agents.pop(record.id, None)
            self._histories.pop(record.id, None)

    def forget_all(self) -> None:
        """Drop what is kept in memory of every session."""
        self._agents.clear()
        self._histories.clear()

    def agent_session(self, record: SessionRecord, records: Sequence[MessageRecord] = ()) -> AgentSession:
        session = self._agents.get(record.id)
        if session is None:
            user_times = [r.created_at for r in records if r.role == "user"]
            session = self._agent.open_session(
                session_id=record.id, platform=record.platform, memory=scope_for_record(record), user_times=user_times
            )
            self._agents[record.id] = session
            while len(self._agents) > MAX_CACHED_AGENT_SESSIONS:
                self._agents.popitem(last=False)
        self._agents.move_to_end(record.id)
        return session

    def expired(self, record: SessionRecord, records: Sequence[MessageRecord]) -> str | None:
        """Why the session should not continue ("idle", "daily"), or None."""
        policy = self._settings.reset
        if policy == "none":
            return None
        last = records[-1].created_at if records else record.started_at
        now = self._clock()
        if policy == "idle":
            return "idle" if now - last >= self._settings.idle_minutes * 60 else None
        return "daily" if last < _last_rollover(now, self._settings.daily_hour) else None

    def memory_outdated(self, record: SessionRecord) -> str | None:
        """Why the memory frozen into the session's prompt must not be shown any more, or None."""
        scope = scope_for_record(record)
        if scope is None or holds_legacy_memory(record.system_prompt or ""):
            return "memory_scope"
        forgotten = self._agent.memories.forgotten_at(scope)
        if forgotten is not None and record.started_at < forgotten:
            return "forgotten"
        return None

    def _conversation(
        self, record: SessionRecord, records: list[MessageRecord], *, reset_reason: str | None = None
    ) -> Conversation:
        return Conversation(record=record, history=self._history(record, records), records=records,
                            reset_reason=reset_reason)  # fmt: skip

    def _history(self, record: SessionRecord, records: list[MessageRecord]) -> list[ChatMessage]:
        """The system prompt and ``records`` as the agent's messages, converting only what is new since last time."""
        prompt = record.system_prompt or ""
        known = self._histories.get(record.id)
        converted = len(known.messages) - 1 if known is not None else 0
        if (
            known is None
            or known.system_prompt != prompt
            or len(records) < converted
            or (converted and records[converted - 1].id != known.last_record_id)
        ):  # first time, or the stored history is not the one converted before: start over
            known = _History(prompt, [ChatMessage.system(prompt)], None)
            converted = 0
            self._histories[record.id] = known
            while len(self._histories) > MAX_CACHED_AGENT_SESSIONS:
                self._histories.popitem(last=False)
        self._histories.move_to_end(record.id)
        if len(records) > converted:
            known.messages.extend(to_chat(r) for r in records[converted:])
            known.last_record_id = records[-1].id
        return list(known.messages)


def _last_rollover(now: float, hour: int) -> float:
    """The most recent local ``hour``:00 at or before ``now``."""
    local = dt.datetime.fromtimestamp(now).astimezone()
    boundary = local.replace(hour=hour, minute=0, second=0, microsecond=0)
    if boundary > local:
        boundary -= dt.timedelta(days=1)
    return boundary.timestamp()
