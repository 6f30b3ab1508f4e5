"""The storage surface: what the gateway, the CLI and the benchmarks may ask of a store, and what every engine keeps.

``StorageEngine`` is the contract. Two engines implement it: the SQLite ``Store`` (``storage/store.py``)
and ``PostgresStore`` (``storage/postgres/store.py``), and the conformance tests
(``tests/storage/conformance/``, and the storage modules marked ``both_engines``) run the same
checks against both. Code outside ``storage`` reaches a store only through these members (an architecture
test, ``tests/architecture/test_storage_surface.py``, fails on a call to anything else), so a member
added to an engine and used by the gateway must be added here first, with the guarantee it keeps.

What travels across the surface is shared by every engine: the records of ``storage/records.py``
(``SessionRecord``, ``MessageRecord``, ``OutboxRecord`` ...), ``TurnEnd``, ``Usage``, ``LastHeard`` and
``SearchOwner``, and the errors of ``storage/errors.py`` (an engine raises ``StorageError`` subclasses,
never its driver's own exceptions).

Two things are not members on purpose. Opening a store takes engine-specific arguments (a file and
its ``synchronous`` mode, a server URL and its pool), so each engine has its own ``open``, and
``storage.open_store(url)`` calls the one the ``storage.url`` setting names. Backup, restore and
the offline check work on a database as a whole, not through an open store: ``BackupHooks`` names the
functions the CLI and ``doctor`` call, which the ``storage.backup`` module provides for SQLite (a
PostgreSQL database is backed up with ``pg_dump``; the CLI says so).

Shared rules for every member: each returns an awaitable; nothing is written or read once
``close()`` has begun (``StoreClosedError``); a write the engine could not make durable raises
``WriteFailedError`` and a failed read ``ReadFailedError``; a transient failure (a busy database,
a serialization conflict, a dropped connection) is retried by the engine before it is reported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from storage.backup import DatabaseCheck
from storage.last_heard import LastHeard
from storage.ledger import TurnEnd
from storage.records import (
    InboxRecord,
    MessageRecord,
    NewMessage,
    OutboxChunk,
    OutboxRecord,
    PairingCode,
    SearchHit,
    SessionRecord,
    UsageTotals,
)
from storage.search.fulltext import SearchOwner
from storage.sessions import Usage

__all__ = ["BackupHooks", "PairingStorage", "StorageEngine"]


@runtime_checkable
class PairingStorage(Protocol):
    """The DM pairing state (``store.pairing``). The policy (alphabet, lifetimes, lockouts) is the gateway's."""

    async def add_code(self, code: PairingCode, *, unless_offered_since: float | None = None) -> bool:
        """Store an offered code. With ``unless_offered_since``, the check that the user was offered no code
        since then and the insert are one atomic step: two messages at once never both get a code."""
        ...

    async def take_code(self, platform: str, code: str, now: float) -> PairingCode | None:
        """Use up a code that is unused and unexpired at ``now``; each code is handed out at most once, even to
        concurrent callers. None for an unknown, expired or used code."""
        ...

    async def record_failure(self, platform: str, now: float) -> None:
        """Remember one approval attempt with a wrong code."""
        ...

    async def clear_failures(self, platform: str) -> int:
        """Forget the platform's failed attempts; returns how many there were."""
        ...

    async def failure_times(self, platform: str, since: float) -> list[float]:
        """The times of the platform's failed attempts at or after ``since``, oldest first."""
        ...

    async def approve(self, platform: str, user_id: str, user_name: str | None, now: float) -> None:
        """Let the user in (approving an approved user again keeps one approval)."""
        ...

    async def is_approved(self, platform: str, user_id: str) -> bool:
        """Whether the user is approved now."""
        ...

    async def pending(self, now: float) -> list[PairingCode]:
        """Codes still waiting (unused, unexpired at ``now``), oldest first."""
        ...

    async def approvals(self) -> list[tuple[str, str, str | None, float]]:
        """Approved users as ``(platform, user_id, user_name, approved_at)``, newest first."""
        ...

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Withdraw an approval; False when the user had none."""
        ...


@runtime_checkable
class StorageEngine(Protocol):
    """Sessions, messages, lineage and titles, search, the gateway's inbox and outbox, pairing and usage."""

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Commit every write already queued, then release the database. Calling it again does nothing."""
        ...

    async def __aenter__(self) -> Self:
        """The store itself; leaving the block closes it."""
        ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """``close()``."""
        ...

    @property
    def is_open(self) -> bool:
        """False from the moment ``close()`` begins."""
        ...

    async def ping(self) -> bool:
        """``probe()`` as a yes or no, for /health: False when closed or when the probe fails; never raises."""
        ...

    async def probe(self) -> None:
        """Read the schema and the newest row of each table the gateway lives on, cheaply enough to run on every
        /health request; ``ReadFailedError`` when the database does not answer or those rows cannot be read."""
        ...

    # -- sessions --------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        session_key: str,
        platform: str,
        chat_id: str,
        chat_type: str | None = None,
        thread_id: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        parent_session_id: str | None = None,
        session_id: str | None = None,
        tool_specs: str | None = None,
    ) -> SessionRecord:
        """Start a session with an empty history. ``system_prompt`` and ``tool_specs`` (the tools the session is
        offered, as text the agent wrote) are kept as given for the session's whole life, and a compaction's
        child (``split_session``) keeps its parent's tools;
        without ``session_id`` the engine makes a new time-sortable id (``new_session_id``). The title is
        cleaned and must be unused (``TitleInUseError``, ``InvalidTitleError``)."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session as stored now (counters included), or None for an unknown id."""
        ...

    async def end_session(self, session_id: str, reason: str) -> bool:
        """Close a session. The first reason stays: False when it had ended already; ``SessionNotFoundError``
        for an unknown id. An ended session is never the open session of its key again."""
        ...

    async def list_sessions(self, platform: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """The newest sessions first, at most ``limit``, of one platform or all."""
        ...

    async def find_open_session(self, session_key: str) -> SessionRecord | None:
        """The newest session of the routing key that has not ended, or None. Whatever the engine keeps in memory,
        the answer reflects every write committed before the call, including other processes' writes."""
        ...

    # -- usage -----------------------------------------------------------------------------------

    def add_usage(
        self, session_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, last_prompt_tokens: int = 0, cost_usd: float = 0.0,
    ) -> Awaitable[None]:  # fmt: skip
        """Add one model call to the session's counters (``last_prompt_tokens`` replaces, the rest add up).
        Queued at the call, in order with the store's other writes; the awaitable ends once it is committed."""
        ...

    def add_call_usage(self, session_id: str, usage: Usage) -> Awaitable[None]:
        """``add_usage`` with the figures in one ``Usage``."""
        ...

    async def usage_since(self, since: float) -> UsageTotals:
        """Every session's model calls at or after ``since`` (epoch seconds), summed."""
        ...

    # -- messages --------------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, new: Sequence[NewMessage], *, usage: Usage | None = None
    ) -> Awaitable[list[MessageRecord]]:
        """Append to the history in order, numbered on from the last ``seq`` with no gap; the records once committed.

        The write is queued at the call (not at the first await), in order with the store's other writes,
        so a caller may queue a message and await it later. ``usage`` is added in the same transaction.
        No messages with ``usage`` stores only the usage. ``SessionNotFoundError`` for an unknown session.
        """
        ...

    async def load_messages(self, session_id: str, *, last_seq: int | None = None) -> list[MessageRecord]:
        """The whole history ordered by ``seq``, every committed append included (another process's too).

        ``last_seq`` (the session's ``message_count`` as just read) lets a cached history be served without a
        query when it is still whole. ``SessionNotFoundError`` for an unknown session.
        """
        ...

    # -- lineage and titles ----------------------------------------------------------------------

    async def split_session(
        self, parent_id: str, new: Sequence[NewMessage], *, system_prompt: str | None = None
    ) -> SessionRecord:
        """Compression: end ``parent_id`` and open its child holding ``new``, in one transaction (after a crash there
        is either the open parent or the ended parent with its child, never both open)."""
        ...

    async def lineage(self, session_id: str) -> list[SessionRecord]:
        """The chain of compressions ``session_id`` belongs to, root first, newest last."""
        ...

    async def set_title(self, session_id: str, title: str | None) -> str | None:
        """Name a session; titles are unique across sessions (``TitleInUseError``), cleaned, and None or blank
        clears the title. Returns the title as stored."""
        ...

    async def resolve_title(self, title: str) -> SessionRecord | None:
        """The newest session of the chain one of whose sessions has ``title``; None if no session has it."""
        ...

    # -- search ----------------------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int = 20, platform: str | None = None, owner: SearchOwner | None = None
    ) -> list[SearchHit]:
        """Messages matching ``query`` (text, tool names, tool arguments), best first, at most ``limit``, each with an
        excerpt marking the match.

        The query language is the same on every engine: words, ``prefix*``, quoted phrases; terms of three or
        more letters also match inside longer words, CJK text matches from two characters. Whatever a user
        types is a query: punctuation ("chat-send", "P2.2", "key: value"), unbalanced quotes, operators
        alone, an empty string return hits or nothing and never raise. ``owner`` limits it to one person's or
        one shared conversation's sessions.
        """
        ...

    async def index_words(self, *, slices: int | None = None) -> int:
        """Bring any search index kept behind the writes up to date now; returns how many messages it read (0 for
        an engine that indexes as it writes). After it returns, search sees every message committed before."""
        ...

    # -- inbox -----------------------------------------------------------------------------------

    def inbox_accept(
        self, platform: str, event_id: str, session_key: str, payload: Mapping[str, Any]
    ) -> Awaitable[bool]:
        """Store an inbound event durably; the adapter acknowledges it to the platform only after this completes.

        False when ``(platform, event_id)`` was stored before (a redelivery): the event is not stored twice
        and must not run again. Queued at the call, in order with the store's other writes.
        """
        ...

    def inbox_mark_done(self, platform: str, event_id: str) -> Awaitable[bool]:
        """Mark an event handled (it leaves ``inbox_unfinished``); False when it is unknown or done already."""
        ...

    async def inbox_unfinished(self) -> list[InboxRecord]:
        """Accepted events not yet done, oldest first, with their payloads: what a restart runs again."""
        ...

    async def last_heard(self, platform: str, *, limit: int = 200) -> list[LastHeard]:
        """The platform's chats with an open session, most recently active first, each with the newest event the
        inbox holds from it (the one stored last when two share an instant): where a catch-up starts."""
        ...

    async def inbox_prune(self, older_than: float) -> int:
        """Forget events that were done before ``older_than``; unfinished ones stay. Returns how many went."""
        ...

    # -- outbox ----------------------------------------------------------------------------------

    def finish_turn(self, end: TurnEnd) -> Awaitable[list[OutboxRecord]]:
        """End a turn in one transaction: its final messages and their usage, the reply's chunks queued in the
        outbox, the events it answers marked done. All of it or none of it.

        Finishing the same ``turn_id`` again stores nothing new and returns the rows queued the first time, so a
        replayed turn is never delivered twice. A live row of the turn becomes the chunk at its place (pending,
        its platform message id kept, so delivery edits that message). ``SessionNotFoundError`` for an unknown
        session, with nothing stored. Queued at the call, in order with the store's other writes.
        """
        ...

    def outbox_add(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunks: Sequence[str | OutboxChunk]
    ) -> Awaitable[list[OutboxRecord]]:
        """Queue a message that answers no event (a notice, progress), its chunks in order. A chunk queued under
        ``turn_id`` before, at the same place, is kept as first queued and returned again: nothing is sent twice."""
        ...

    def outbox_mark_sent(self, outbox_id: int, platform_message_id: str | None) -> Awaitable[bool]:
        """Record a chunk delivered (it leaves ``outbox_pending`` for good); False when it was not pending."""
        ...

    async def outbox_edit(
        self, outbox_id: int, text: str, *, plain: str | None = None, markup: str | None = None
    ) -> OutboxRecord | None:
        """New text for a delivered chunk, pending again until its platform message is edited; None when the chunk
        never reached the platform."""
        ...

    async def outbox_mark_failed(self, outbox_id: int, error: str, *, give_up: bool = False) -> bool:
        """Count a failed attempt (the chunk stays pending); with ``give_up`` it leaves the pending list."""
        ...

    async def outbox_get(self, outbox_id: int) -> OutboxRecord | None:
        """One outbox row as stored now."""
        ...

    async def outbox_pending(self) -> list[OutboxRecord]:
        """What is still to deliver, grouped by chat and in order within a chat; live rows are not in it."""
        ...

    async def outbox_prune(self, older_than: float) -> int:
        """Forget sent or given-up chunks settled before ``older_than``; pending ones stay. Returns how many went."""
        ...

    # -- streamed replies (live outbox rows) -----------------------------------------------------

    async def outbox_stream_open(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunk: OutboxChunk, *,
        mode: str = "edit",
    ) -> OutboxRecord:  # fmt: skip
        """The live row (chunk 0) of the turn's streamed reply, made before its first send; the row a crashed run
        left is returned as it is, its message id kept, so the message is edited and never posted twice. A row
        returned not live means the turn's answer is queued already."""
        ...

    async def outbox_stream_shown(
        self, outbox_id: int, text: str, platform_message_id: str | None, *, plain: str | None = None,
        mode: str | None = None,
    ) -> bool:  # fmt: skip
        """What the live row's message shows now; False when the row is no longer live."""
        ...

    async def outbox_stream_attempted(self, outbox_id: int, error: str) -> bool:
        """A send of the live row whose outcome is unknown: the next send asks the platform first."""
        ...

    async def outbox_stream_close(self, outbox_id: int, text: str, *, plain: str | None = None) -> OutboxRecord | None:
        """End a live row without its turn's answer: a pending edit to ``text`` (returned), or the row dropped when
        nothing was shown."""
        ...

    async def outbox_live(self) -> list[OutboxRecord]:
        """Every live row, oldest first: the streams running now and those a crash left."""
        ...

    # -- pairing ---------------------------------------------------------------------------------

    @property
    def pairing(self) -> PairingStorage:
        """The DM pairing state, stored in the same database."""
        ...


class BackupHooks(Protocol):
    """What the CLI (``backup``, ``restore``) and ``doctor`` do to a database as a whole, without an open store.

    ``storage.backup`` provides these for an SQLite file. Each returns or raises what it found, in words an
    operator can act on (``BackupError``); none leaves a half-written target behind.
    """

    def check_database(self, path: Path, *, thorough: bool = False, budget: float | None = None) -> DatabaseCheck:
        """Whether the database is whole and which schema version it has; read-only, safe while the gateway runs."""
        ...

    def backup_database(self, source: Path, target: Path) -> DatabaseCheck:
        """A consistent copy of ``source`` as of one commit, in a new ``target``, verified."""
        ...

    def restore_database(self, backup: Path, live: Path, *, keep: Path) -> DatabaseCheck:
        """Put a verified backup in place of ``live``, keeping the replaced database at ``keep``; refused while the
        database is in use."""
        ...

    def database_in_use(self, path: Path) -> bool:
        """Whether another process has the database open now."""
        ...
