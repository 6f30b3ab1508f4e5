"""``PostgresStore``: the storage surface (``storage/contract.py``) on a PostgreSQL server, through asyncpg.

    store = await PostgresStore.open("postgresql://switchboard@db.internal/switchboard")
    session = await store.create_session(session_key="telegram:42", platform="telegram", chat_id="42")
    await store.close()

What differs from the SQLite ``Store`` and why:

* **No writer thread.** Each write is one transaction on a pooled connection (asyncpg, prepared
  statements cached per connection; the pool runs no reset query between uses, which cost p99 53 ms
  against 35 ms in ``bench.pg_driver``), run until it lands by ``run_with_retry``
  (``storage/postgres/retry.py``): a conflict is tried again at once, a server that went away is
  waited for and logged, anything else raised as ``WriteFailedError``. Appends, the write a busy
  gateway makes most, are group-committed instead: the appends waiting at a moment go to the server
  in a few statements (``storage/postgres/append_batch.py``).
* **"Queued at the call" is kept per key.** The members the contract says are queued at the call
  (``append_messages``, ``add_usage``, ``inbox_accept``, ``finish_turn``, ``outbox_*``) start their
  write at the call and return its future, shielded from the caller's cancellation. Writes with the
  same key (a session, an inbox conversation, a turn, an outbox row) run one after another in call
  order; writes with different keys run side by side on the pool, which is what a server is for.
  Across processes, the database orders them: an append moves its session's ``last_seq`` under the
  row's lock before numbering.
* **Nothing is cached in memory.** Every read asks the server, so what another process committed is
  always seen (the several-gateways issue builds on that); a history load is one indexed query.
* **Search is indexed as it is written** (a generated ``tsvector`` and the vocabulary the append
  statement keeps), so ``index_words`` has nothing to do; the word index's pending entries are merged
  in the background (``storage/postgres/index_upkeep.py``).

The modules beside this one hold the SQL, one concept each, as functions of a connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from storage.errors import SessionNotFoundError
from storage.ids import new_session_id
from storage.last_heard import LastHeard
from storage.ledger import TurnEnd
from storage.postgres import inbox, last_heard, lineage, messages, outbox, outbox_live, sessions
from storage.postgres.connection import Connection
from storage.postgres.outbox_claims import claimant
from storage.postgres.lifecycle import PostgresLifecycle, retrieved
from storage.postgres.search import search as search_messages
from storage.records import (
    InboxRecord,
    MessageRecord,
    NewMessage,
    OutboxChunk,
    OutboxRecord,
    SearchHit,
    SessionRecord,
    UsageTotals,
)
from storage.search.fulltext import SearchOwner
from storage.sessions import Usage
from storage.titles import clean_title

__all__ = ["PostgresStore"]

T = TypeVar("T")


def _nothing(write: asyncio.Future[Any]) -> asyncio.Future[None]:
    """A future that ends as ``write`` does, with None for its result (a usage write answers None, as the contract
    says); an outcome nobody awaits is not reported as unretrieved."""
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def settle(done: asyncio.Future[Any]) -> None:
        if ended.done():
            return
        if done.cancelled():
            ended.cancel()
        elif (error := done.exception()) is not None:
            ended.set_exception(error)
        else:
            ended.set_result(None)

    write.add_done_callback(settle)
    ended.add_done_callback(retrieved)
    return ended


class PostgresStore(PostgresLifecycle):
    """Sessions, messages, lineage, search and the gateway's inbox, outbox and pairing on PostgreSQL.
    Use ``PostgresStore.open``."""

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
        """Start a session; ``system_prompt`` is the frozen snapshot it runs with (stored once per text)."""
        new = sessions.NewSession(
            session_key=session_key, platform=platform, chat_id=chat_id, chat_type=chat_type, thread_id=thread_id,
            user_id=user_id, title=clean_title(title), model=model, system_prompt=system_prompt,
            parent_session_id=parent_session_id, tool_specs=tool_specs,
        )  # fmt: skip
        now = self._clock()
        op = partial(sessions.insert_session, new=new, session_id=session_id or new_session_id(now), started_at=now)
        return await self._write(op, what="create session")

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self._read(partial(sessions.fetch_session, session_id=session_id))

    async def end_session(self, session_id: str, reason: str) -> bool:
        """End a session, after the writes to it queued before. The first reason wins: False if it had already ended
        (``SessionNotFoundError`` if unknown)."""
        if not reason:
            raise ValueError("an end reason is required")
        op = partial(sessions.end_session, session_id=session_id, reason=reason, ended_at=self._clock())
        return await self._in_session_order(session_id, op, what="end session")

    async def list_sessions(self, platform: str | None = None, limit: int = 50) -> list[SessionRecord]:
        return await self._read(partial(sessions.list_sessions, platform=platform, limit=limit))

    async def find_open_session(self, session_key: str) -> SessionRecord | None:
        """The newest session of ``session_key`` that has not ended, read from the server (another process's
        sessions included)."""
        return await self._read(partial(sessions.find_open_session, session_key=session_key))

    async def set_title(self, session_id: str, title: str | None) -> str | None:
        """Title a session (unique across sessions); None or blank clears it. Returns the cleaned title."""
        return await self._in_session_order(session_id, partial(sessions.set_title, session_id=session_id,
                                                                title=title), what="set title")  # fmt: skip

    async def _in_session_order(self, session_id: str, op: Callable[[Connection], Awaitable[T]], *, what: str) -> T:
        """``op`` in a transaction of its own, after the writes to ``session_id`` queued before it (as SQLite's one
        writer would run it)."""

        async def write() -> T:
            return await self._write(op, what=what)

        return await self._queued(("session", session_id), write)

    # -- usage -----------------------------------------------------------------------------------

    def add_usage(
        self, session_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, last_prompt_tokens: int = 0, cost_usd: float = 0.0,
    ) -> Awaitable[None]:  # fmt: skip
        return self.add_call_usage(session_id, Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens, last_prompt_tokens=last_prompt_tokens, cost_usd=cost_usd,
        ))  # fmt: skip

    def add_call_usage(self, session_id: str, usage: Usage) -> Awaitable[None]:
        """An append of no message carrying ``usage`` (``messages.append_many`` adds the counters and the usage log row
        in its one statement): queued at the call, after the session's writes queued before it, batched with the other
        appends; ``SessionNotFoundError`` for an unknown session (nothing written)."""
        append = messages.Append.of(session_id, (), usage)
        return _nothing(self._queued_future(("session", session_id), lambda: self._appends.add(append)))

    async def usage_since(self, since: float) -> UsageTotals:
        """Every session's model calls at or after ``since`` (epoch seconds), summed."""
        return await self._read(partial(sessions.usage_since, since=since))

    # -- messages --------------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, new: Sequence[NewMessage], *, usage: Usage | None = None
    ) -> Awaitable[list[MessageRecord]]:
        """Queued at the call, after the session's writes queued before it (``_queued``), and written together with
        the other sessions' appends waiting at that moment (``storage/postgres/append_batch.py``)."""
        append = messages.Append.of(session_id, new, usage)
        return self._queued_future(("session", session_id), lambda: self._appends.add(append))

    async def load_messages(self, session_id: str, *, last_seq: int | None = None) -> list[MessageRecord]:
        """Read from the server every time (``last_seq`` serves no cache here), in one snapshot with the check that
        the session exists."""

        async def history(conn: Connection) -> list[MessageRecord]:
            async with conn.transaction(readonly=True, isolation="repeatable_read"):
                records = await messages.load(conn, session_id)
                if not records and await conn.fetchval("SELECT 1 FROM sessions WHERE id = $1", session_id) is None:
                    raise SessionNotFoundError(session_id)
                return records

        return await self._read(history)

    # -- lineage and titles ----------------------------------------------------------------------

    async def split_session(
        self, parent_id: str, new: Sequence[NewMessage], *, system_prompt: str | None = None
    ) -> SessionRecord:
        """End ``parent_id`` for compression and continue in a child holding ``new``: one transaction, after the
        writes to the parent queued before it (``storage/postgres/lineage.py``)."""
        now = self._clock()
        op = partial(lineage.split_session, parent_id=parent_id, new=tuple(new), system_prompt=system_prompt,
                     child_id=new_session_id(now), now=now)  # fmt: skip
        return await self._in_session_order(parent_id, op, what="split session")

    async def lineage(self, session_id: str) -> list[SessionRecord]:
        """The chain ``session_id`` belongs to, root first, newest last."""
        return await self._read(partial(lineage.chain, session_id=session_id))

    async def resolve_title(self, title: str) -> SessionRecord | None:
        """The newest session of the chain whose session carries ``title``."""
        return await self._read(partial(lineage.resolve_title, title=title))

    # -- search ----------------------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int = 20, platform: str | None = None, owner: SearchOwner | None = None
    ) -> list[SearchHit]:
        """Two passes at most (``storage/postgres/search.py``): the words as typed, then parts of words."""
        return await self._read(partial(search_messages, query=query, limit=limit, platform=platform, owner=owner),
                                what="search")  # fmt: skip

    async def index_words(self, *, slices: int | None = None) -> int:
        """Nothing to do: the word and trigram indexes are kept by every insert."""
        self._check_open()
        return 0

    # -- inbox -----------------------------------------------------------------------------------

    def inbox_accept(
        self, platform: str, event_id: str, session_key: str, payload: Mapping[str, Any]
    ) -> Awaitable[bool]:
        """Queued at the call after the earlier accepts of the same conversation (``session_key``), so a chat's events
        are stored in the order they were handed over; False for an event stored before, by any process (one
        ``INSERT ... ON CONFLICT DO NOTHING``: of concurrent accepts of one event exactly one stores it)."""
        payload = dict(payload)

        async def write() -> bool:
            return await self._write(partial(inbox.accept, platform=platform, event_id=event_id,
                                             session_key=session_key, payload=payload, now=self._clock()),
                                     what="inbox accept")  # fmt: skip

        return self._queued(("inbox", session_key), write)

    def inbox_mark_done(self, platform: str, event_id: str) -> Awaitable[bool]:
        """Queued at the call, after the earlier marks of the same event."""

        async def write() -> bool:
            return await self._write(partial(inbox.mark_done, platform=platform, event_id=event_id, now=self._clock()),
                                     what="inbox mark done")  # fmt: skip

        return self._queued(("inbox", platform, event_id), write)

    async def inbox_unfinished(self) -> list[InboxRecord]:
        return await self._read(inbox.unfinished)

    async def last_heard(self, platform: str, *, limit: int = 200) -> list[LastHeard]:
        """``storage/postgres/last_heard.py``: two reads in one snapshot."""
        return await self._read(partial(last_heard.last_heard, platform=platform, limit=limit))

    async def inbox_prune(self, older_than: float) -> int:
        return await self._write(partial(inbox.prune, older_than=older_than), what="inbox prune")

    # -- outbox ----------------------------------------------------------------------------------

    def finish_turn(self, end: TurnEnd) -> Awaitable[list[OutboxRecord]]:
        """One transaction: the final messages appended (``messages.append``: the session's row locked, numbered on,
        usage added), the answered events marked done, the live row taken over and the chunks queued
        (``outbox.add``). Queued at the call: with messages after the session's earlier writes (so an append queued
        after it numbers on from its messages), without them after the turn's earlier writes."""
        final = end.messages
        if final is not None and not final.messages:
            raise ValueError("a turn's final messages, when given, hold at least one message")
        chunks, answered = tuple(end.chunks), tuple(end.answered)
        new = () if final is None else tuple(final.messages)

        async def turn_end(conn: Connection) -> list[OutboxRecord]:
            await self._fence(conn)
            now = self._clock()
            if final is not None:
                await messages.append(conn, final.session_id, new, final.usage, now)
            # Fenced above: a replica's rows are its own (``outbox_claims.py``), and it is alive until the commit.
            return await outbox.add(conn, turn_id=end.turn_id, platform=end.platform, chat_id=end.chat_id,
                                    thread_id=end.thread_id, chunks=chunks, answered=answered, now=now,
                                    claimed_by=self.cluster.replica)  # fmt: skip

        async def write() -> list[OutboxRecord]:
            return await self._write(turn_end, what="finish turn")

        key = ("turn", end.turn_id) if final is None else ("session", final.session_id)
        return self._queued(key, write)

    def outbox_add(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunks: Sequence[str | OutboxChunk]
    ) -> Awaitable[list[OutboxRecord]]:
        """Queued at the call, after the earlier writes of the same ``turn_id``."""
        queued = tuple(OutboxChunk(text=c) if isinstance(c, str) else c for c in chunks)

        async def add(conn: Connection) -> list[OutboxRecord]:
            return await outbox.add(conn, turn_id=turn_id, platform=platform, chat_id=chat_id, thread_id=thread_id,
                                    chunks=queued, answered=(), now=self._clock(),
                                    claimed_by=await claimant(conn, self.cluster.replica))  # fmt: skip

        async def write() -> list[OutboxRecord]:
            return await self._write(add, what="outbox add")

        return self._queued(("turn", turn_id), write)

    def outbox_mark_sent(self, outbox_id: int, platform_message_id: str | None) -> Awaitable[bool]:
        """Queued at the call, after the earlier writes of the same row (``_row_write``); fenced in a cluster."""
        mark = partial(outbox.mark_sent, outbox_id=outbox_id, platform_message_id=platform_message_id)

        async def fenced(conn: Connection, *, now: float) -> bool:
            await self._fence(conn)
            return await mark(conn, now=now)

        return self._row_write(outbox_id, fenced, "outbox mark sent")

    async def outbox_edit(
        self, outbox_id: int, text: str, *, plain: str | None = None, markup: str | None = None
    ) -> OutboxRecord | None:
        return await self._row_write(outbox_id, partial(outbox.edit, outbox_id=outbox_id, text=text, plain=plain,
                                                        markup=markup, replica=self.cluster.replica), "outbox edit")  # fmt: skip

    async def outbox_mark_failed(self, outbox_id: int, error: str, *, give_up: bool = False) -> bool:
        return await self._row_write(outbox_id, partial(outbox.mark_failed, outbox_id=outbox_id, error=error,
                                                        give_up=give_up), "outbox mark failed")  # fmt: skip

    async def outbox_get(self, outbox_id: int) -> OutboxRecord | None:
        return await self._read(partial(outbox.get, outbox_id=outbox_id))

    async def outbox_pending(self) -> list[OutboxRecord]:
        """Every pending row; once the cluster joined (several gateways), this replica's own after it took the free
        ones it could, whole chats at a time (``storage/postgres/outbox_claims.py``): a write then."""
        if self.cluster.replica is None:
            return await self._read(outbox.pending)
        return await self._write(partial(outbox.pending, replica=self.cluster.replica), what="outbox claim")

    async def outbox_prune(self, older_than: float) -> int:
        return await self._write(partial(outbox.prune, older_than=older_than), what="outbox prune")

    def _row_write(
        self, outbox_id: int, op: Callable[..., Awaitable[T]], what: str
    ) -> asyncio.Future[T]:
        """``op(conn, now=...)`` in a transaction, queued after the earlier writes of outbox row ``outbox_id``: the
        marks, edits and stream updates of one row land in the order they were asked for."""

        async def write() -> T:
            return await self._write(lambda conn: op(conn, now=self._clock()), what=what)

        return self._queued(("outbox", outbox_id), write)

    # -- streamed replies (live outbox rows) -----------------------------------------------------

    async def outbox_stream_open(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunk: OutboxChunk, *,
        mode: str = "edit",
    ) -> OutboxRecord:  # fmt: skip
        """Queued after the earlier writes of the turn (``storage/postgres/outbox_live.py``)."""

        async def write() -> OutboxRecord:
            return await self._write(partial(outbox_live.open_row, turn_id=turn_id, platform=platform, chat_id=chat_id,
                                             thread_id=thread_id, chunk=chunk, mode=mode, now=self._clock(),
                                             replica=self.cluster.replica), what="outbox stream open")  # fmt: skip

        return await self._queued(("turn", turn_id), write)

    async def outbox_stream_shown(
        self, outbox_id: int, text: str, platform_message_id: str | None, *, plain: str | None = None,
        mode: str | None = None,
    ) -> bool:  # fmt: skip
        return await self._row_write(outbox_id, partial(outbox_live.shown, outbox_id=outbox_id, text=text, plain=plain,
                                                        platform_message_id=platform_message_id, mode=mode),
                                     "outbox stream shown")  # fmt: skip

    async def outbox_stream_attempted(self, outbox_id: int, error: str) -> bool:
        return await self._row_write(outbox_id, partial(outbox_live.attempted, outbox_id=outbox_id, error=error),
                                     "outbox stream attempted")  # fmt: skip

    async def outbox_stream_close(self, outbox_id: int, text: str, *, plain: str | None = None) -> OutboxRecord | None:
        return await self._row_write(outbox_id, partial(outbox_live.close, outbox_id=outbox_id, text=text, plain=plain,
                                                        replica=self.cluster.replica), "outbox stream close")  # fmt: skip

    async def outbox_live(self) -> list[OutboxRecord]:
        """Every live row; once the cluster joined, only the free ones and this replica's (another's is its turn's)."""
        return await self._read(partial(outbox_live.live_rows, replica=self.cluster.replica))
