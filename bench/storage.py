"""Storage benchmark: appends, search and history loads on SQLite and PostgreSQL, each against a raw floor.

``python -m bench.storage [--quick] [--json] [--loop asyncio] [--engine sqlite|postgresql|both]``

Both engines by default, their figures side by side, each against its own targets (``ok`` /
``MISSED``); ``--engine`` runs one. The PostgreSQL run is ``bench/storage_postgres.py``; what both
runs do to a store (corpus, planted words, appends, timed reads) is ``bench/storage_workload.py``.
With ``--json`` the last line is one engine's figures (``engine`` names it), or for both
``{"engine": "both", "sqlite": {...}, "postgresql": {...}}``. The SQLite run:

1. Preload (not measured): a database made by ``Store.open`` is filled with
   raw sqlite3: 1,000 sessions of 100 messages (100k messages, quick mode
   too; rows of concurrent sessions interleave on disk as they would in real
   use), ~5 % of them Chinese, plus a few planted rare words to look for.
   Then the store's substring vocabulary is brought up to date
   (``vocabulary_build_s``), as the background indexer would have done.
2. Floor: raw ``sqlite3`` inserts the workload's rows into a copy of that
   database, same schema (triggers and full-text index included), same
   pragmas as the store's writer (WAL, ``synchronous=normal``), 100 rows per
   transaction, one thread. It uses one ``INSERT ... SELECT`` over a JSON
   array per transaction, the fastest raw way (FTS5 writes one index segment
   per statement); ``raw_executemany_per_s`` is the plain ``executemany``
   way, for reference. The floor does no index maintenance.
3. Store: 100 sessions append the same rows concurrently through
   ``Store.append_messages``, one message per call, each awaiting its own
   durable commit. The store also merges the index in bounded slices.
   Floor and store alternate for ``ROUNDS`` rounds on fresh copies; rates and
   their ratio are medians, latencies are over every append of every round.
   Each round also runs the store with its background word indexer off
   (``appends_no_indexer_per_s``; ``word_indexer_cost_pct`` is the median of
   the per-round slowdowns) and reports how many messages the indexer had left
   to read when the appends ended (``word_index_lag_rows``, worst round).
4. Reads on the last store: search p50 for a rare word, for 2- and
   3-character CJK words and for a prefix (``zq003*``), 5 hits each; ``search_substring_p50_ms`` for the
   inside of a rare word ("q003x" of "zq003xv": found through the vocabulary),
   ``search_substring_tail_p50_ms`` for the same right after 1,000 appends the
   indexer has not read yet (the bounded scan), and
   ``search_substring_burst_tail_p50_ms`` right after as many as one round
   appends (what a substring search costs at the end of such a burst, before
   the indexer's first quiet tick); ``history_load_us`` is loading a
   100-message session the process has loaded before (the steady state of a
   conversation: the cached history is checked against the database with one
   index probe), ``history_load_cold_us`` the first load of a session.

Messages look like an agent's: a user question, an assistant turn with a tool
call, the tool's output, and a final answer; about 400 bytes on average
(``mean_message_bytes``: content plus tool-call JSON). The harness freezes its
own objects out of the garbage collector (``gc.freeze()``) before measuring.

The store runs on the event loop ``switchboard run`` gives the gateway
(``gateway.event_loop: auto``: uvloop where installed), since that is the loop
its callers are on in production; ``--loop asyncio`` measures asyncio's own,
and ``event_loop`` in the figures says which ran. The loop matters here: each
commit hands 100 results back to it, and the writer waits while it wakes the
callers and takes their next messages.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from bench import storage_postgres
from bench.common import CpuSteal, add_loop_option, bench_parser, known_args, loop_name, percentile, say
from bench.storage_workload import (
    Corpus,
    append_figures,
    concurrent_appends,
    message_bytes,
    plant_spots,
    planted_words,
    reads,
    timed,
    with_word,
)
from gateway import event_loop
from storage import NewMessage, Store
from storage.messages import prepare_append

SESSIONS = 100
ROUNDS = 3  # floor and store alternate, medians reported: the machine is shared and noisy
PRELOAD_SESSIONS = 1000
PRELOAD_PER_SESSION = 100
TARGETS = {
    "appends_per_s": ">= 6,500",
    "ratio_to_floor": ">= 0.7",
    "append_p99_ms": "<= 20",
    "append_max_ms": "<= 100",
    "search_p50_ms": "<= 2",
    "search_cjk2_p50_ms": "<= 10",
    "history_load_us": "<= 300",
}
_INSERT = """
    INSERT INTO messages (id, session_id, seq, created_at, role, content, tool_calls, tool_call_id,
                          tool_name, reasoning, token_estimate, platform_message_id, search_cjk, media)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_BULK_INSERT = """
    INSERT INTO messages (id, session_id, seq, created_at, role, content, tool_calls, tool_call_id,
                          tool_name, reasoning, token_estimate, platform_message_id, search_cjk, media)
    SELECT r.value->>0, r.value->>1, r.value->>2, ?1, r.value->>3, r.value->>4, r.value->>5, r.value->>6,
           r.value->>7, r.value->>8, r.value->>9, r.value->>10, r.value->>11, r.value->>12
    FROM json_each(?2) AS r
"""


def _values(messages: Sequence[NewMessage]) -> list[tuple[Any, ...]]:
    return list(prepare_append("", messages).values)


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON", "wal_autocheckpoint = 0"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


async def _create_schema(path: Path) -> None:
    store = await Store.open(path)
    await store.close()


def preload(path: Path, corpus: Corpus, sessions: int, per_session: int, plant: int) -> dict[str, list[str]]:
    """Fill the database; returns the planted rare words and CJK words (5 messages each)."""
    asyncio.run(_create_schema(path))
    conn = _raw(path)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (id, session_key, platform, chat_id, started_at) VALUES (?, ?, ?, ?, ?)",
        [(f"pre{s:05d}", f"bench:pre{s}", "telegram", str(s), time.time() - 86400 + s) for s in range(sessions)],
    )
    conn.execute("COMMIT")
    planted = planted_words(corpus.rng, plant)
    spots = plant_spots(corpus.rng, planted, sessions * per_session)
    message_id = 0
    now = time.time() - 3600
    block = 100  # sessions written concurrently: their rows interleave, as in real life
    for first in range(0, sessions, block):
        members = range(first, min(first + block, sessions))
        histories = {s: corpus.messages(per_session, start=s * per_session) for s in members}
        order = [(seq, s) for seq in range(1, per_session + 1) for s in members]
        for index, (seq, s) in enumerate(order, start=message_id):
            if index in spots:
                histories[s][seq - 1] = with_word(histories[s][seq - 1], spots[index])
        values = {s: _values(history) for s, history in histories.items()}
        rows = []
        for seq, s in order:
            message_id += 1
            rows.append((message_id, f"pre{s:05d}", seq, now, *values[s][seq - 1]))
        conn.execute("BEGIN")
        conn.executemany(_INSERT, rows)
        conn.execute("COMMIT")
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return planted


async def build_vocabulary(path: Path) -> tuple[float, int]:
    """Bring the substring vocabulary up to date; returns (seconds, words)."""
    store = await Store.open(path, word_index_interval=None)
    try:
        started = time.perf_counter()
        await store.index_words()
        elapsed = time.perf_counter() - started
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        words = conn.execute("SELECT COUNT(*) FROM search_words").fetchone()[0]
    return elapsed, words


def _index_lag(path: Path) -> int:
    """Messages the word indexer has not read yet."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT (SELECT MAX(id) FROM messages) - words_through FROM search_progress").fetchone()
    return int(row[0])


def floor(path: Path, workload: list[list[NewMessage]], *, bulk: bool = True) -> float:
    """Raw sqlite3 rows/s: the workload's rows in transactions of 100, one thread, no asyncio.

    ``bulk``: one INSERT ... SELECT over a JSON array per transaction (the fastest raw
    way: FTS5 writes one index segment per statement); otherwise ``executemany``.
    """
    conn = _raw(path)
    ids = [f"floor{s:03d}" for s in range(len(workload))]
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (id, session_key, platform, chat_id, started_at) VALUES (?, ?, ?, ?, ?)",
        [(sid, f"bench:{sid}", "telegram", sid, time.time()) for sid in ids],
    )
    conn.execute("COMMIT")
    last_id = conn.execute("SELECT MAX(id) FROM messages").fetchone()[0] or 0
    values = [_values(messages) for messages in workload]
    rows = []
    for seq in range(1, max(len(v) for v in values) + 1):
        for index, session_values in enumerate(values):
            if seq <= len(session_values):
                last_id += 1
                rows.append((last_id, ids[index], seq, *session_values[seq - 1]))
    started = time.perf_counter()
    for first in range(0, len(rows), 100):
        batch = rows[first : first + 100]
        conn.execute("BEGIN")
        if bulk:
            conn.execute(_BULK_INSERT, (time.time(), json.dumps(batch, ensure_ascii=False)))
        else:
            now = time.time()
            conn.executemany(_INSERT, [(*row[:3], now, *row[3:]) for row in batch])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return len(rows) / elapsed


async def appends(
    path: Path, workload: list[list[NewMessage]], *, indexer: bool = True
) -> tuple[float, list[float], Store]:
    """Store messages/s and per-call latencies (s); 100 sessions appending concurrently."""
    store = await Store.open(path, synchronous="normal", **({} if indexer else {"word_index_interval": None}))
    rate, latencies = await concurrent_appends(store, workload)
    return rate, latencies, store


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    add_loop_option(parser)
    parser.add_argument(
        "--engine", default="both", choices=(*ENGINES, "both"),
        help="the storage engine to measure (default: both, their figures side by side)",
    )  # fmt: skip
    args = known_args(parser, argv)
    loop = event_loop.loop_factory(args.loop)
    figures: dict[str, dict[str, Any]] = {}
    for engine in ENGINES if args.engine == "both" else (args.engine,):
        say(f"-- {engine}")
        figures[engine] = ENGINES[engine](quick=args.quick, loop=loop)
    report(figures, as_json=args.json)
    return 0


def sqlite_figures(*, quick: bool, loop: Callable[[], asyncio.AbstractEventLoop]) -> dict[str, Any]:
    """The SQLite store's figures (see the module's docstring)."""
    per_session = 100 if quick else 300
    corpus = Corpus(seed=7)
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
        base = Path(tmp) / "preloaded.db"
        started = time.perf_counter()
        planted = preload(base, corpus, PRELOAD_SESSIONS, PRELOAD_PER_SESSION, plant=10 if quick else 20)
        say(f"preloaded {PRELOAD_SESSIONS * PRELOAD_PER_SESSION:,} messages in {time.perf_counter() - started:.1f} s")
        vocabulary_s, vocabulary_words = event_loop.run(build_vocabulary(base), loop)
        say(f"substring vocabulary: {vocabulary_words:,} words in {vocabulary_s:.1f} s")
        workload = corpus.workload(SESSIONS, per_session)
        gc.collect()
        gc.freeze()  # the harness's own data (corpus, workload) stays out of the collector's scans
        steal = CpuSteal()
        rounds: list[tuple[float, float, list[float]]] = []
        unindexed: list[float] = []
        unindexed_latencies: list[float] = []
        lags: list[int] = []
        for index in range(ROUNDS):
            floor_db, store_db = Path(tmp) / f"floor{index}.db", Path(tmp) / f"store{index}.db"
            bare_db = Path(tmp) / f"bare{index}.db"
            for copy in (floor_db, store_db, bare_db):
                shutil.copyfile(base, copy)
            raw_rate = floor(floor_db, workload)
            rate, latencies, lag = event_loop.run(_append_round(store_db, workload), loop)
            bare_rate, bare_latencies, _ = event_loop.run(_append_round(bare_db, workload, indexer=False), loop)
            say(f"round {index + 1}: floor {raw_rate:,.0f} rows/s, store {rate:,.0f} messages/s "
                f"(indexer off: {bare_rate:,.0f}; left to index: {lag:,})")  # fmt: skip
            rounds.append((raw_rate, rate, latencies))
            unindexed.append(bare_rate)
            unindexed_latencies += bare_latencies
            lags.append(lag)
            floor_db.unlink()
            bare_db.unlink()
        steal_pct = steal.percent()  # over the append rounds, the part the targets are about
        many_db = Path(tmp) / "many.db"
        shutil.copyfile(base, many_db)
        many_rate = floor(many_db, workload, bulk=False)
        burst = SESSIONS * per_session
        results = event_loop.run(_read_phase(store_db, planted, corpus, quick=quick, burst=burst), loop)
    sizes = [message_bytes(message) for messages in workload for message in messages]
    return {
        "engine": "sqlite",
        **append_figures(rounds),
        "appends_no_indexer_per_s": statistics.median(unindexed),
        "word_indexer_cost_pct": statistics.median(
            100 * (1 - rate / bare) for (_, rate, _), bare in zip(rounds, unindexed, strict=True)
        ),
        "append_p99_no_indexer_ms": percentile(unindexed_latencies, 99) * 1000,
        "append_max_no_indexer_ms": max(unindexed_latencies) * 1000,
        "word_index_lag_rows": max(lags),
        "vocabulary_build_s": vocabulary_s,
        "vocabulary_words": vocabulary_words,
        **results,
        "raw_executemany_per_s": many_rate,
        "rounds": ROUNDS,
        "messages_appended_per_round": burst,
        "preloaded_messages": PRELOAD_SESSIONS * PRELOAD_PER_SESSION,
        "mean_message_bytes": statistics.mean(sizes),
        "cpu_steal_pct": steal_pct,
    }


async def _append_round(
    path: Path, workload: list[list[NewMessage]], *, indexer: bool = True
) -> tuple[float, list[float], int]:
    rate, latencies, store = await appends(path, workload, indexer=indexer)
    lag = await asyncio.to_thread(_index_lag, path)
    await store.close()
    return rate, latencies, lag


async def _read_phase(
    path: Path, planted: dict[str, list[str]], corpus: Corpus, *, quick: bool, burst: int
) -> dict[str, Any]:
    repeat = 5 if quick else 20
    results: dict[str, Any] = {"event_loop": loop_name()}
    store = await Store.open(path)
    try:
        await store.index_words()  # what the last round left, as the background indexer would
        results.update(await reads(store, planted, quick=quick, sessions=PRELOAD_SESSIONS,
                                   per_session=PRELOAD_PER_SESSION))  # fmt: skip
    finally:
        await store.close()
    store = await Store.open(path, word_index_interval=None)
    try:
        results["search_substring_tail_p50_ms"] = await tail_searches(store, corpus, repeat)
        await store.index_words()
        results["search_substring_burst_tail_p50_ms"] = await tail_searches(store, corpus, repeat, tail=burst)
    finally:
        await store.close()
    return results


async def tail_searches(store: Store, corpus: Corpus, repeat: int, tail: int = 1000) -> float:
    """Median ms of a substring search right after ``tail`` appends the indexer has not read."""
    session = await store.create_session(session_key="bench:tail", platform="telegram", chat_id="tail")
    messages = corpus.messages(tail, start=20_000_000)
    planted = [f"zt{tail}w{index:03d}yw" for index in range(5)]  # the term is the inside: unique per tail
    for index, word in enumerate(planted):
        spot = index * (tail // len(planted))
        messages[spot] = NewMessage("user", f"{messages[spot].content} {word}")
    for first in range(0, tail, 100):
        await store.append_messages(session.id, messages[first : first + 100])
    samples: list[float] = []
    for word in planted:
        hits = await store.search(word[1:-1])
        if len(hits) != 1:
            raise RuntimeError(f"benchmark broken: {len(hits)} tail hits for {word[1:-1]!r}")
        samples += await timed(lambda w=word[1:-1]: store.search(w), repeat)
    return statistics.median(samples) * 1000


Figures = Callable[..., dict[str, Any]]
ENGINES: Final[dict[str, Figures]] = {"sqlite": sqlite_figures, "postgresql": storage_postgres.figures}
"""Each engine's run: ``run(quick=..., loop=...)`` -> its figures, ``engine`` first."""
ENGINE_TARGETS: Final = {"sqlite": TARGETS, "postgresql": storage_postgres.TARGETS}


def verdict(value: Any, target: str) -> str:
    """``"ok"`` or ``"MISSED"`` for ``value`` against a target written ``">= 3,000"`` or ``"<= 50"``."""
    sign, number = target.split()
    bound = float(number.replace(",", ""))
    return "ok" if (value >= bound if sign == ">=" else value <= bound) else "MISSED"


def _cell(figures: dict[str, Any], key: str, targets: dict[str, str]) -> str:
    if key not in figures:
        return "-"
    value = figures[key]
    shown = f"{value:,.3f}" if isinstance(value, float) else str(value)
    if key in targets and isinstance(value, int | float):
        shown += f"  ({targets[key]}: {verdict(value, targets[key])})"
    return shown


def report(figures: dict[str, dict[str, Any]], *, as_json: bool) -> None:
    """Each engine's figures in a column, each figure against its engine's target; with ``as_json`` the JSON
    last: one engine's figures as they are, or ``{"engine": "both", "sqlite": {...}, "postgresql": {...}}``."""
    keys = list(dict.fromkeys(key for engine in figures.values() for key in engine))
    rows = [["", *figures]] + [
        [key, *(_cell(engine, key, ENGINE_TARGETS[name]) for name, engine in figures.items())] for key in keys
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if as_json:
        one = next(iter(figures.values())) if len(figures) == 1 else {"engine": "both", **figures}
        print(json.dumps(one, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
