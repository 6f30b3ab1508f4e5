"""Storage benchmark: group-commit appends, search and history loads against a raw-sqlite floor.

``python -m bench.storage [--quick] [--json] [--loop asyncio]``

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
4. Reads on the last store: search p50 for a rare word and for 2- and
   3-character CJK words (5 hits each); ``search_substring_p50_ms`` for the
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
import itertools
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import CpuSteal, emit, loop_name, parse_args, percentile, say
from gateway import event_loop
from storage import NewMessage, Store
from storage.messages import prepare_append

SESSIONS = 100
ROUNDS = 3  # floor and store alternate, medians reported: the machine is shared and noisy
PRELOAD_SESSIONS = 1000
PRELOAD_PER_SESSION = 100
CJK_SHARE = 0.05
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
                          tool_name, reasoning, token_estimate, platform_message_id, search_cjk)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_HAN = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而能好都然没日于起还发成事只作当想看无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切规装"
_BULK_INSERT = """
    INSERT INTO messages (id, session_id, seq, created_at, role, content, tool_calls, tool_call_id,
                          tool_name, reasoning, token_estimate, platform_message_id, search_cjk)
    SELECT r.value->>0, r.value->>1, r.value->>2, ?1, r.value->>3, r.value->>4, r.value->>5, r.value->>6,
           r.value->>7, r.value->>8, r.value->>9, r.value->>10, r.value->>11
    FROM json_each(?2) AS r
"""
_WORD_COUNT = 20_000


class Corpus:
    """Deterministic agent-like messages."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = ["".join(self.rng.choice(letters) for _ in range(self.rng.randint(2, 9))) for _ in range(_WORD_COUNT)]
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(_WORD_COUNT)))
        self.tools = ["terminal", "read_file", "web_search", "write_file", "memory"]

    def text(self, size: int) -> str:
        if self.rng.random() < CJK_SHARE:
            return "".join(self.rng.choice(_HAN) for _ in range(max(4, size // 3)))
        words = self.rng.choices(self.words, cum_weights=self.cum_weights, k=max(1, size // 6))
        out = " ".join(words)
        return out[:size]

    def turn(self, call_no: int) -> list[NewMessage]:
        call_id = f"call_{call_no:08d}"
        tool = self.rng.choice(self.tools)
        arguments = json.dumps({"query": self.text(60), "path": f"/srv/app/{self.rng.choice(self.words)}.py"})
        return [
            NewMessage("user", self.text(self.rng.randint(100, 500)), token_estimate=75),
            NewMessage(
                "assistant",
                self.text(self.rng.randint(20, 200)),
                tool_calls=[{"id": call_id, "name": tool, "arguments": arguments}],
                token_estimate=50,
            ),
            NewMessage("tool", self.text(self.rng.randint(300, 1000)), tool_call_id=call_id, tool_name=tool),
            NewMessage("assistant", self.text(self.rng.randint(150, 700)), token_estimate=105),
        ]

    def messages(self, count: int, start: int = 0) -> list[NewMessage]:
        out: list[NewMessage] = []
        call_no = start
        while len(out) < count:
            out.extend(self.turn(call_no))
            call_no += 1
        return out[:count]


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
    planted = _planted_words(corpus.rng, plant)
    targets = {index: word for index, word in enumerate(w for words in planted.values() for w in words for _ in range(5))}
    spots = dict(zip(corpus.rng.sample(range(sessions * per_session), len(targets)), targets.values()))
    message_id = 0
    now = time.time() - 3600
    block = 100  # sessions written concurrently: their rows interleave, as in real life
    for first in range(0, sessions, block):
        members = range(first, min(first + block, sessions))
        histories = {s: _values(corpus.messages(per_session, start=s * per_session)) for s in members}
        rows = []
        for seq in range(1, per_session + 1):
            for s in members:
                values = histories[s][seq - 1]
                if message_id in spots:
                    values = _with_word(values, spots[message_id])
                message_id += 1
                rows.append((message_id, f"pre{s:05d}", seq, now, *values))
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


def _planted_words(rng: random.Random, count: int) -> dict[str, list[str]]:
    rare_han = "鑫龘齉靐麤饕餮魑魅魍魉彧犇淼焱垚鱻骉羴赑"
    pairs = [a + b for a in rare_han for b in rare_han if a != b]
    triples = [a + b + c for a, b, c in zip(rare_han, rare_han[1:] + rare_han[:1], rare_han[2:] + rare_han[:2])]
    return {
        "rare": [f"zq{index:03d}xv" for index in range(count)],
        "cjk2": rng.sample(pairs, count),
        "cjk3": rng.sample(triples, min(count, len(triples))),
    }


def _with_word(values: tuple[Any, ...], word: str) -> tuple[Any, ...]:
    role, content, tool_calls, tool_call_id, tool_name = values[:5]
    content = f"{content[:200]} {word} {content[200:]}"
    return _values([NewMessage(role, content, tool_calls=json.loads(tool_calls) if tool_calls else (),
                               tool_call_id=tool_call_id, tool_name=tool_name)])[0]


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
    sessions = [
        await store.create_session(session_key=f"bench:{s}", platform="telegram", chat_id=str(s))
        for s in range(len(workload))
    ]
    latencies: list[float] = []

    async def converse(session_id: str, messages: list[NewMessage]) -> None:
        for message in messages:
            started = time.perf_counter()
            await store.append_messages(session_id, [message])
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(converse(s.id, m) for s, m in zip(sessions, workload)))
    elapsed = time.perf_counter() - started
    return len(latencies) / elapsed, latencies, store


async def timed(coroutine_factory: Any, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await coroutine_factory()
        samples.append(time.perf_counter() - started)
    return samples


async def searches(store: Store, planted: dict[str, list[str]], repeat: int) -> dict[str, float]:
    results: dict[str, float] = {}
    for kind, key in (("rare", "search_p50_ms"), ("cjk2", "search_cjk2_p50_ms"), ("cjk3", "search_cjk3_p50_ms")):
        samples: list[float] = []
        for word in planted[kind]:
            hits = await store.search(word)
            if not hits:
                raise RuntimeError(f"benchmark broken: no hit for planted {kind} word {word!r}")
            samples += await timed(lambda w=word: store.search(w), repeat)
        results[key] = statistics.median(samples) * 1000
    return results


async def history_loads(store: Store, count: int, repeat: int) -> dict[str, float]:
    session_ids = [f"pre{s:05d}" for s in range(0, PRELOAD_SESSIONS, max(1, PRELOAD_SESSIONS // count))][:count]
    cold: list[float] = []
    for session_id in session_ids:
        cold += await timed(lambda sid=session_id: store.load_messages(sid), 1)
    warm: list[float] = []
    for session_id in session_ids:
        history = await store.load_messages(session_id)
        if len(history) != PRELOAD_PER_SESSION:
            raise RuntimeError(f"benchmark broken: {session_id} has {len(history)} messages")
        warm += await timed(lambda sid=session_id: store.load_messages(sid), repeat)
    return {"history_load_us": statistics.median(warm) * 1e6, "history_load_cold_us": statistics.median(cold) * 1e6}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, loop=True)
    loop = event_loop.loop_factory(args.loop)
    per_session = 100 if args.quick else 300
    corpus = Corpus(seed=7)
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
        base = Path(tmp) / "preloaded.db"
        started = time.perf_counter()
        planted = preload(base, corpus, PRELOAD_SESSIONS, PRELOAD_PER_SESSION, plant=10 if args.quick else 20)
        say(f"preloaded {PRELOAD_SESSIONS * PRELOAD_PER_SESSION:,} messages in {time.perf_counter() - started:.1f} s")
        vocabulary_s, vocabulary_words = event_loop.run(build_vocabulary(base), loop)
        say(f"substring vocabulary: {vocabulary_words:,} words in {vocabulary_s:.1f} s")
        workload = [corpus.messages(per_session, start=10_000_000 + s * per_session) for s in range(SESSIONS)]
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
        results = event_loop.run(_read_phase(store_db, planted, corpus, quick=args.quick, burst=burst), loop)
    ratios = [rate / raw_rate for raw_rate, rate, _ in rounds]
    latencies = [sample for _, _, samples in rounds for sample in samples]
    sizes = [_message_bytes(message) for messages in workload for message in messages]
    figures: dict[str, Any] = {
        "appends_per_s": statistics.median(rate for _, rate, _ in rounds),
        "raw_floor_per_s": statistics.median(raw_rate for raw_rate, _, _ in rounds),
        "ratio_to_floor": statistics.median(ratios),
        "append_p50_ms": percentile(latencies, 50) * 1000,
        "append_p99_ms": percentile(latencies, 99) * 1000,
        "append_max_ms": max(latencies) * 1000,
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
    emit(figures, as_json=args.json, targets=TARGETS)
    return 0


def _message_bytes(message: NewMessage) -> int:
    calls = json.dumps([call.to_dict() for call in message.tool_calls]) if message.tool_calls else ""
    return len(message.content.encode()) + len(calls.encode())


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
        results.update(await searches(store, planted, repeat=repeat))
        results["search_substring_p50_ms"] = await substring_searches(store, planted["rare"], repeat)
        results.update(await history_loads(store, count=100 if quick else 300, repeat=repeat))
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


async def substring_searches(store: Store, words: list[str], repeat: int) -> float:
    """Median ms to find the inside of planted rare words ("q003x" of "zq003xv", 5 messages each)."""
    samples: list[float] = []
    for word in words:
        inside = word[1:-1]
        hits = await store.search(inside)
        if len(hits) != 5 or not all(word in hit.snippet for hit in hits):
            raise RuntimeError(f"benchmark broken: {len(hits)} substring hits for {inside!r} (inside {word!r})")
        samples += await timed(lambda w=inside: store.search(w), repeat)
    return statistics.median(samples) * 1000


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
