"""``bench.storage`` on PostgreSQL: the same workload as the SQLite run, through ``PostgresStore``.

A throwaway local server (``tests/fakes/postgres_server.py``, as ``bench.pg_driver`` starts it; without
the machine's PostgreSQL binaries this run says so and is skipped) gets one database that
``PostgresStore.open`` migrates. Then:

1. Preload (not measured): 1,000 sessions of 100 messages (100k, quick mode too), the same corpus and
   planted words as the SQLite run, with COPY; the word index (GIN) is dropped for the copy and built
   again after it from its own definition, the vocabulary is filled from the messages' words (as
   ``storage migrate`` fills it), then ``VACUUM ANALYZE``, as a database
   that has lived a while would be (``preload_s``). That database is the template of every round.
2. Floor: raw asyncpg on a fresh copy (``CREATE DATABASE ... TEMPLATE``): 100 writers insert the
   workload's rows, one autocommitted INSERT each, through a pool as large as the store's, numbering
   the rows themselves (no session lock, no transaction around it). It is what the server and the
   driver do for this schema (generated ``tsvector``, its GIN index) at this concurrency; the
   vocabulary, which the store's appends also keep, is not written.
3. Store: 100 sessions made by ``create_session`` append the same rows through ``append_messages``,
   one message per call, each awaiting its commit, on another fresh copy. Floor and store alternate
   for ``ROUNDS`` rounds; rates and their ratio are medians, latencies over every append of every round.
4. Reads on the last store's database (100k + one round of messages): search p50 for a rare word,
   2- and 3-character CJK words, a prefix (``zq003*``) and the inside of a word (``q003x``), 5 hits
   each; ``history_load_us`` loads a 100-message session again (nothing is cached: every load asks
   the server), ``history_load_cold_us`` the first load of each session.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any, Final

import asyncpg

from bench.common import CpuSteal, loop_name, percentile, say
from bench.storage_workload import (
    Corpus,
    append_figures,
    concurrent_appends,
    message_bytes,
    plant_spots,
    planted_words,
    reads,
    with_word,
)
from gateway import event_loop
from storage import NewMessage, PostgresStore
from storage.postgres import vocabulary
from storage.postgres.lifecycle import POOL_SIZE
from storage.records import media_to_json, tool_calls_to_json
from tests.fakes.postgres_server import PostgresServer, PostgresUnavailable

SESSIONS: Final = 100
ROUNDS: Final = 3
PRELOAD_SESSIONS: Final = 1000
PRELOAD_PER_SESSION: Final = 100
TEMPLATE: Final = "bench_preloaded"
TARGETS: Final = {
    "appends_per_s": ">= 3,000",
    "append_p99_ms": "<= 50",
    "search_p50_ms": "<= 5",
}
"""Issue 30's targets for PostgreSQL on the 2-core development machine, the server local."""

_SESSION_COLUMNS: Final = ("id", "session_key", "platform", "chat_id", "started_at")
_MESSAGE_COLUMNS: Final = (
    "session_id", "seq", "role", "content", "tool_calls", "tool_call_id", "tool_name", "reasoning",
    "token_estimate", "created_at", "platform_message_id", "media",
)  # fmt: skip
_FLOOR_INSERT: Final = f"""
    INSERT INTO messages ({", ".join(_MESSAGE_COLUMNS)})
    VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11, $12::jsonb)
"""


def _row(session_id: str, seq: int, at: float, m: NewMessage) -> tuple[Any, ...]:
    """``m`` as the values of ``_MESSAGE_COLUMNS``, stored as the store stores it (the corpus holds no NUL)."""
    return (
        session_id, seq, m.role, m.content, tool_calls_to_json(m.tool_calls), m.tool_call_id, m.tool_name,
        m.reasoning, m.token_estimate, at, m.platform_message_id, media_to_json(m.media),
    )  # fmt: skip


async def preload(dsn: str, corpus: Corpus, sessions: int, per_session: int, plant: int) -> dict[str, list[str]]:
    """Migrate the database and fill it; returns the planted words (5 messages each)."""
    store = await PostgresStore.open(dsn)
    await store.close()
    planted = planted_words(corpus.rng, plant)
    spots = plant_spots(corpus.rng, planted, sessions * per_session)
    now = time.time()
    conn = await asyncpg.connect(dsn)
    try:
        gin = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' AND indexdef LIKE '% USING gin %'"
        )
        for index in gin:
            await conn.execute(f'DROP INDEX "{index["indexname"]}"')
        await conn.copy_records_to_table("sessions", columns=_SESSION_COLUMNS, records=[
            (f"pre{s:05d}", f"bench:pre{s}", "telegram", str(s), now - 86400 + s) for s in range(sessions)
        ])  # fmt: skip
        index = 0
        block = 100  # sessions written concurrently: their rows interleave, as in real life
        for first in range(0, sessions, block):
            members = range(first, min(first + block, sessions))
            histories = {s: corpus.messages(per_session, start=s * per_session) for s in members}
            rows = []
            for seq in range(1, per_session + 1):
                for s in members:
                    message = histories[s][seq - 1]
                    if index in spots:
                        message = with_word(message, spots[index])
                    index += 1
                    rows.append(_row(f"pre{s:05d}", seq, now - 3600, message))
            await conn.copy_records_to_table("messages", columns=_MESSAGE_COLUMNS, records=rows)
        await conn.execute("SET maintenance_work_mem = '256MB'")
        for index in gin:
            await conn.execute(index["indexdef"])
        await vocabulary.fill(conn)  # as storage migrate does after its copy
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return planted


async def floor(dsn: str, workload: list[list[NewMessage]]) -> float:
    """Raw asyncpg rows/s: one writer per conversation, one autocommitted INSERT per message, the store's pool size."""
    pool = await asyncpg.create_pool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
    try:
        ids = [f"floor{s:03d}" for s in range(len(workload))]
        await pool.copy_records_to_table(
            "sessions", columns=_SESSION_COLUMNS,
            records=[(sid, f"bench:{sid}", "telegram", sid, time.time()) for sid in ids],
        )  # fmt: skip

        async def writer(session_id: str, messages: list[NewMessage]) -> None:
            for seq, message in enumerate(messages, start=1):
                await pool.execute(_FLOOR_INSERT, *_row(session_id, seq, time.time(), message))

        started = time.perf_counter()
        await asyncio.gather(*(writer(sid, messages) for sid, messages in zip(ids, workload, strict=True)))
        elapsed = time.perf_counter() - started
    finally:
        await pool.close()
    return sum(map(len, workload)) / elapsed


async def store_round(dsn: str, workload: list[list[NewMessage]]) -> tuple[float, list[float]]:
    store = await PostgresStore.open(dsn)
    try:
        return await concurrent_appends(store, workload)
    finally:
        await store.close()


async def read_phase(dsn: str, planted: dict[str, list[str]], *, quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = {"event_loop": loop_name()}
    store = await PostgresStore.open(dsn)
    try:
        results.update(await reads(store, planted, quick=quick, sessions=PRELOAD_SESSIONS,
                                   per_session=PRELOAD_PER_SESSION))  # fmt: skip
    finally:
        await store.close()
    return results


class Databases:
    """Fresh copies of the preloaded template on the server, each dropped after use."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.made = 0

    async def copy(self) -> tuple[str, str]:
        """A new database made from ``TEMPLATE``: (name, URL)."""
        self.made += 1
        name = f"bench_round{self.made}"
        conn = await asyncpg.connect(self.server.dsn)
        try:
            await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
        finally:
            await conn.close()
        return name, self.server.dsn_for(name)


async def measure(server: PostgresServer, *, quick: bool) -> dict[str, Any]:
    per_session = 100 if quick else 300
    corpus = Corpus(seed=7)
    template = server.create_database(TEMPLATE)
    started = time.perf_counter()
    planted = await preload(template, corpus, PRELOAD_SESSIONS, PRELOAD_PER_SESSION, plant=10 if quick else 20)
    preload_s = time.perf_counter() - started
    say(f"preloaded {PRELOAD_SESSIONS * PRELOAD_PER_SESSION:,} messages in {preload_s:.1f} s")
    workload = corpus.workload(SESSIONS, per_session)
    databases = Databases(server)
    steal = CpuSteal()
    rounds: list[tuple[float, float, list[float]]] = []
    last = ""
    for number in range(ROUNDS):
        name, dsn = await databases.copy()
        raw_rate = await floor(dsn, workload)
        server.drop_database(name)
        last, dsn = await databases.copy()
        rate, latencies = await store_round(dsn, workload)
        say(f"round {number + 1}: floor {raw_rate:,.0f} rows/s, store {rate:,.0f} messages/s, "
            f"p99 {percentile(latencies, 99) * 1000:.1f} ms")  # fmt: skip
        rounds.append((raw_rate, rate, latencies))
        if number < ROUNDS - 1:
            server.drop_database(last)
    steal_pct = steal.percent()
    results = await read_phase(server.dsn_for(last), planted, quick=quick)
    sizes = [message_bytes(message) for messages in workload for message in messages]
    return {
        "engine": "postgresql",
        **append_figures(rounds),
        "preload_s": preload_s,
        **results,
        "pool_size": POOL_SIZE,
        "rounds": ROUNDS,
        "messages_appended_per_round": SESSIONS * per_session,
        "preloaded_messages": PRELOAD_SESSIONS * PRELOAD_PER_SESSION,
        "mean_message_bytes": statistics.mean(sizes),
        "cpu_steal_pct": steal_pct,
    }


def figures(*, quick: bool, loop: Callable[[], asyncio.AbstractEventLoop]) -> dict[str, Any]:
    """The PostgreSQL store's figures, or ``{"engine": "postgresql", "skipped": why}`` without a server to run."""
    try:
        server = PostgresServer()
    except PostgresUnavailable as missing:
        say(f"skipped PostgreSQL: {missing}")
        return {"engine": "postgresql", "skipped": str(missing)}
    server.start()
    try:
        return event_loop.run(measure(server, quick=quick), loop)
    finally:
        server.stop()
