"""``Store``: the gateway's durable memory, one SQLite file in WAL mode.

    store = await Store.open(home / "state.db")
    session = await store.create_session(session_key="telegram:42", platform="telegram", chat_id="42")
    await store.append_messages(session.id, [NewMessage("user", "hello")])
    history = await store.load_messages(session.id)
    await store.close()

or ``async with await Store.open(path) as store: ...``. One store can be
shared by every task of a process. Every method returns something to await
(most are coroutines; writes that many callers make at once return the
writer's future, queued at the call) and the event loop never waits on
SQLite: the engine under it (``storage/engine/engine.py``) commits writes
in groups on the writer's own thread, reads through a small pool of reader
connections, and keeps the WAL short and the substring-search vocabulary
current in the background. The store says what each operation writes or
reads (the modules beside it) and keeps what it knows in memory: recent
histories (``storage/cache.py``) and each routing key's open session
(``storage/open_sessions.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from functools import partial
from typing import Any

from storage import inbox, ledger, lineage, messages, outbox, outbox_live, sessions
from storage.engine.bulk import BulkWrite
from storage.errors import SessionNotFoundError
from storage.ids import new_session_id
from storage.last_heard import LastHeard, last_heard
from storage.lifecycle import StoreLifecycle
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
from storage.search import fulltext
from storage.titles import clean_title

__all__ = ["Store"]


class Store(StoreLifecycle):
    """Sessions, messages, lineage, search and the gateway's inbox, outbox and pairing. Use ``Store.open``."""

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
        """Start a session; ``system_prompt`` is the frozen snapshot it runs with. ``session_id`` defaults to a
        new time-sortable id (callers needing it early pass one from ``storage.ids.new_session_id()``)."""
        new = sessions.NewSession(
            session_key=session_key, platform=platform, chat_id=chat_id, chat_type=chat_type, thread_id=thread_id,
            user_id=user_id, title=clean_title(title), model=model, system_prompt=system_prompt,
            parent_session_id=parent_session_id, tool_specs=tool_specs,
        )  # fmt: skip
        now = self._clock()
        op = partial(sessions.insert_session, new=new, session_id=session_id or new_session_id(now), started_at=now)
        record: SessionRecord = await self._write(op)
        self._open_sessions.written(record)
        self._cache.put(record.id, [])  # its history is known: the next turn needs no read
        return record

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self._read(partial(sessions.fetch_session, session_id=session_id))

    async def end_session(self, session_id: str, reason: str) -> bool:
        """End a session. The first reason wins: False if it had already ended (``SessionNotFoundError`` if unknown)."""
        try:
            return await self._write(partial(sessions.end_session, session_id=session_id, reason=reason,
                                             ended_at=self._clock()))  # fmt: skip
        finally:
            self._open_sessions.forget(session_id)

    async def set_title(self, session_id: str, title: str | None) -> str | None:
        """Title a session (unique across sessions); None or blank clears it. Returns the cleaned title."""
        try:
            return await self._write(partial(sessions.set_title, session_id=session_id, title=title))
        finally:
            self._open_sessions.forget(session_id)

    async def list_sessions(self, platform: str | None = None, limit: int = 50) -> list[SessionRecord]:
        return await self._read(partial(sessions.list_sessions, platform=platform, limit=limit))

    async def find_open_session(self, session_key: str) -> SessionRecord | None:
        """The newest session of ``session_key`` that has not ended.

        Served from memory when this process knows it (``storage/open_sessions.py``).
        """
        self._check_open()
        known = self._open_sessions
        known.sync(self._engine.external_commits)
        record = known.get(session_key)
        if record is not None:
            return record
        generation = known.generation
        record = await self._read(partial(sessions.find_open_session, session_key=session_key))
        if record is not None:
            known.remember(record, generation=generation)
        return record

    def add_usage(
        self, session_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, last_prompt_tokens: int = 0, cost_usd: float = 0.0,
    ) -> Awaitable[None]:  # fmt: skip
        """Add one model call's usage; ``last_prompt_tokens`` replaces the previous value."""
        return self.add_call_usage(session_id, sessions.Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens, last_prompt_tokens=last_prompt_tokens, cost_usd=cost_usd,
        ))  # fmt: skip

    def add_call_usage(self, session_id: str, usage: sessions.Usage) -> Awaitable[None]:
        """:meth:`add_usage` with the figures as one ``Usage``."""
        return self._bulk(sessions.add_usage_all, (session_id, usage), settled=partial(self._usage_written, session_id, usage))

    def _usage_written(self, session_id: str, usage: sessions.Usage, _: Any, error: BaseException | None) -> None:
        if error is not None:
            self._open_sessions.forget(session_id)
        else:
            self._open_sessions.add_usage(session_id, usage)

    async def usage_since(self, since: float) -> UsageTotals:
        """Every session's model calls at or after ``since`` (epoch seconds), summed."""
        return await self._read(partial(sessions.usage_since, since=since))

    # -- messages --------------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, new: Sequence[NewMessage], *, usage: sessions.Usage | None = None
    ) -> Awaitable[list[MessageRecord]]:
        """Append messages in order; the awaitable completes once they are committed.

        Queued at once, in call order with the store's other writes (the writer's future, not a
        coroutine), so a caller may queue a message, get on with its work and await it later.
        ``usage``: the model call that produced them, added to the session's counters in the same
        transaction (as ``add_usage`` would, without a write of its own).
        """
        self._check_open()
        if not new:
            return self._usage_only(session_id, usage)
        return self._append(messages.prepare_append(session_id, new, usage))

    async def _usage_only(self, session_id: str, usage: sessions.Usage | None) -> list[MessageRecord]:
        if usage is not None:
            await self.add_call_usage(session_id, usage)
        return []

    def _append(self, request: messages.AppendRequest) -> asyncio.Future[Any]:
        """Queue ``request``; once it is committed, the cache and the open-session map follow what it stored
        (before whoever awaits the future resumes)."""
        return self._engine.append(request, settled=partial(self._appended, request))

    def _appended(self, request: messages.AppendRequest, result: Any, error: BaseException | None) -> None:
        if error is not None:
            self._open_sessions.forget(request.session_id)  # it may or may not be stored: read it again
            return
        records = result if request.then is None else result[0]
        if self._faults is not None:
            self._faults.appended(request.session_id, records)
        self._cache.extend(request.session_id, records)
        self._open_sessions.update(request.session_id, message_count=records[-1].seq)
        if request.usage is not None:
            self._open_sessions.add_usage(request.session_id, request.usage)

    async def load_messages(self, session_id: str, *, last_seq: int | None = None) -> list[MessageRecord]:
        """The whole history of a session, ordered by ``seq``.

        ``last_seq`` is the session's last ``seq`` as just read (``SessionRecord.message_count``
        of a fresh record): with it, a cached history is checked without another query.
        """
        cached = self._cache.get(session_id)
        if cached is None:
            records = await self._read(partial(messages.load_messages, session_id=session_id))
            if not records and await self.get_session(session_id) is None:
                raise SessionNotFoundError(session_id)
            self._cache.put(session_id, records)
            return records
        if last_seq is None:
            last_seq = await self._read(partial(messages.last_seq, session_id=session_id))
        if last_seq is None:
            self._cache.discard(session_id)
            raise SessionNotFoundError(session_id)
        return await self._revalidate(session_id, last_seq)

    async def _revalidate(self, session_id: str, last_seq: int) -> list[MessageRecord]:
        """Serve from the cache if it ends at ``last_seq``; read just the tail if others appended."""
        cached = self._cache.get(session_id) or []
        cached_last = cached[-1].seq if cached else 0
        if len(cached) == cached_last:  # gap-free, as histories always are
            if cached_last == last_seq:
                return cached
            if cached_last < last_seq:
                tail = await self._read(partial(messages.load_messages, session_id=session_id, after_seq=cached_last))
                if not tail or tail[0].seq == cached_last + 1:
                    merged = cached + tail
                    self._cache.put(session_id, merged)
                    return merged
        records = await self._read(partial(messages.load_messages, session_id=session_id))
        self._cache.put(session_id, records)
        return records

    # -- lineage ---------------------------------------------------------------------------------

    async def split_session(
        self, parent_id: str, new: Sequence[NewMessage], *, system_prompt: str | None = None
    ) -> SessionRecord:
        """End ``parent_id`` for compression and continue in a child holding ``new`` (one transaction)."""
        request = messages.prepare_append("", new)
        now = self._clock()
        op = partial(lineage.split_session, parent_id=parent_id, request=request, system_prompt=system_prompt,
                     child_id=new_session_id(now), now=now)  # fmt: skip
        try:
            child: SessionRecord = await self._write(op)
        finally:
            self._open_sessions.forget(parent_id)
        self._open_sessions.written(child)
        return child

    async def lineage(self, session_id: str) -> list[SessionRecord]:
        """The chain ``session_id`` belongs to, root first, newest last."""
        return await self._read(partial(lineage.chain, session_id=session_id))

    async def resolve_title(self, title: str) -> SessionRecord | None:
        """The newest session of the chain whose session carries ``title``."""
        return await self._read(partial(lineage.resolve_title, title=title))

    # -- search ----------------------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int = 20, platform: str | None = None, owner: fulltext.SearchOwner | None = None
    ) -> list[SearchHit]:
        """Full-text search over message text, tool names and tool-call arguments, best match first.

        Terms of 3 or more letters also match inside longer words ("ploy" finds "redeployment") when the
        words as typed find fewer than ``limit`` messages; 1-2 letter terms match whole words (or ``prefix*``).
        ``owner`` keeps it to one person's or one shared conversation's sessions.
        """
        return await self._read(partial(fulltext.search, query=query, limit=limit, platform=platform, owner=owner))

    async def index_words(self, *, slices: int | None = None) -> int:
        """Bring the substring-search vocabulary up to date now (the background indexer does this anyway).

        Returns how many messages were read; ``slices`` bounds the work.
        """
        self._check_open()
        return await self._engine.index_words(slices=slices)

    # -- gateway inbox and outbox ----------------------------------------------------------------

    def inbox_accept(
        self, platform: str, event_id: str, session_key: str, payload: Mapping[str, Any]
    ) -> Awaitable[bool]:
        """Record an inbound event; False if this (platform, event_id) was seen before."""
        return self._bulk(inbox.accept_all, (platform, event_id, session_key, inbox.payload_text(payload)))

    def inbox_mark_done(self, platform: str, event_id: str) -> Awaitable[bool]:
        return self._bulk(inbox.mark_done_all, (platform, event_id))

    async def inbox_unfinished(self) -> list[InboxRecord]:
        """Accepted events not yet done, oldest first (to resume after a restart)."""
        return await self._read(inbox.unfinished)

    async def last_heard(self, platform: str, *, limit: int = 200) -> list[LastHeard]:
        """The chats of ``platform`` with an open session, the most recently active first, each with the last
        message the inbox holds from it (``storage/last_heard.py``): where a catch-up reads from."""
        return await self._read(partial(last_heard, platform=platform, limit=limit))

    async def inbox_prune(self, older_than: float) -> int:
        """Forget finished events done before ``older_than`` (epoch seconds); returns how many."""
        return await self._write(partial(inbox.prune, older_than=older_than))

    def finish_turn(self, end: ledger.TurnEnd) -> Awaitable[list[OutboxRecord]]:
        """End a turn in one transaction (``storage/ledger.py``): its final messages and their usage, the
        reply's chunks in the outbox and the events it answers marked done, all or nothing.

        Returns the reply's rows in chunk order (the rows queued before, when the turn was finished
        already). A live row of the turn (its streamed message) becomes the chunk at its place: pending,
        with the chunk's text, its message id kept, so delivery edits that message to the answer. An unknown session stores and queues nothing (``SessionNotFoundError``).
        """
        self._check_open()
        job = ledger.plan(end)
        if isinstance(job, BulkWrite):
            return self._engine.bulk(job)
        return ledger.queued_rows(self._append(job))

    def outbox_add(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunks: Sequence[str | OutboxChunk]
    ) -> Awaitable[list[OutboxRecord]]:
        """Queue a message's chunks for delivery, in order; the same rows again if ``turn_id`` was queued before.

        For what answers no inbound event (a notice, progress, the rest of an edit); a turn's
        reply is queued by :meth:`finish_turn`.
        """
        queued = tuple(OutboxChunk(text=c) if isinstance(c, str) else c for c in chunks)
        return self._bulk(outbox.add_all, (turn_id, platform, chat_id, thread_id, queued, ()))

    def outbox_mark_sent(self, outbox_id: int, platform_message_id: str | None) -> Awaitable[bool]:
        return self._bulk(outbox.mark_sent_all, (outbox_id, platform_message_id))

    async def outbox_edit(
        self, outbox_id: int, text: str, *, plain: str | None = None, markup: str | None = None
    ) -> OutboxRecord | None:
        """Record new text for a delivered chunk, pending until the platform's message is edited.

        Returns the updated row, or None when the chunk never reached the platform (nothing to edit).
        """
        return await self._write(partial(outbox.edit, outbox_id=outbox_id, text=text, plain=plain, markup=markup,
                                         now=self._clock()))  # fmt: skip

    async def outbox_mark_failed(self, outbox_id: int, error: str, *, give_up: bool = False) -> bool:
        """Count a failed delivery attempt; with ``give_up`` the chunk leaves the pending list."""
        return await self._write(partial(outbox.mark_failed, outbox_id=outbox_id, error=error, give_up=give_up,
                                         now=self._clock()))  # fmt: skip

    async def outbox_get(self, outbox_id: int) -> OutboxRecord | None:
        return await self._read(partial(outbox.get, outbox_id=outbox_id))

    async def outbox_pending(self) -> list[OutboxRecord]:
        """Undelivered chunks, grouped by chat and in order within each chat (live rows are not among them)."""
        return await self._read(outbox.pending)

    # -- streamed replies (live outbox rows: ``storage/outbox_live.py``) ---------------------------

    async def outbox_stream_open(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunk: OutboxChunk, *,
        mode: str = "edit",
    ) -> OutboxRecord:  # fmt: skip
        """The live row of ``turn_id``'s streamed reply (chunk 0), created before its first send, or the one
        a crashed run left (kept with its message id: the replay edits that message, never posts it again).

        ``mode``: ``edit`` or ``native``, how the message is shown. A row returned not live is not for the
        stream (its turn's answer is queued already)."""
        return await self._write(partial(outbox_live.open_row, turn_id=turn_id, platform=platform, chat_id=chat_id,
                                         thread_id=thread_id, chunk=chunk, mode=mode, now=self._clock()))  # fmt: skip

    async def outbox_stream_shown(
        self, outbox_id: int, text: str, platform_message_id: str | None, *, plain: str | None = None,
        mode: str | None = None,
    ) -> bool:  # fmt: skip
        """What a live row's message shows now (after a send or an edit); False if the row is no longer live."""
        return await self._write(partial(outbox_live.shown, outbox_id=outbox_id, text=text, plain=plain,
                                         platform_message_id=platform_message_id, mode=mode, now=self._clock()))  # fmt: skip

    async def outbox_stream_attempted(self, outbox_id: int, error: str) -> bool:
        """Count a send of a live row whose answer was lost (it may have landed): the row's next send, by the
        stream or by delivery once the turn's answer takes it over, asks the platform first (``maybe_sent``)."""
        return await self._write(partial(outbox_live.attempted, outbox_id=outbox_id, error=error, now=self._clock()))

    async def outbox_stream_close(self, outbox_id: int, text: str, *, plain: str | None = None) -> OutboxRecord | None:
        """End a live row without its turn's answer: a pending edit of its message to ``text`` (returned,
        for ``Delivery.deliver``; the outbox finishes it after a crash too), or dropped if nothing was shown."""
        return await self._write(partial(outbox_live.close, outbox_id=outbox_id, text=text, plain=plain,
                                         now=self._clock()))  # fmt: skip

    async def outbox_live(self) -> list[OutboxRecord]:
        """Every live row (a reply being streamed, or one a crash left), oldest first."""
        return await self._read(outbox_live.live_rows)

    async def outbox_prune(self, older_than: float) -> int:
        """Forget sent or failed chunks settled before ``older_than``; returns how many."""
        return await self._write(partial(outbox.prune, older_than=older_than))
