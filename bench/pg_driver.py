"""PostgreSQL driver benchmark: asyncpg against psycopg 3 (async), the measured reason for the engine's driver.

``python -m bench.pg_driver [--quick] [--json] [--loop auto|uvloop|asyncio]``

A throwaway server (tests/fakes/postgres_server.py) gets one fresh database per driver with the same
``messages`` table the storage engine needs: full-text indexed (a generated ``tsvector`` column under a GIN
index) and indexed by session. Through a pool of POOL_SIZE connections of each driver, WRITERS concurrent
writers append rows one statement each (autocommit, the statement prepared by the driver), each append
timed from asking the pool for a connection to the server's answer. Then a history load: the newest 100
rows of one session, read one after another. The drivers take turns, ROUNDS times, so a noisy neighbour
on the shared machine weighs on both; each driver's best round is reported.

The driver with more appends/s wins; the figures of both and the ratio are printed. Exit status 1 only if
a driver lost or duplicated rows; 0 with a "skipped" line where the machine has no PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from bench.common import CpuSteal, add_loop_option, bench_parser, emit, known_args, loop_name, percentile, say
from gateway.event_loop import loop_factory, run
from tests.fakes.postgres_server import PostgresServer, PostgresUnavailable

WRITERS: Final = 100
POOL_SIZE: Final = 20
HISTORY: Final = 100
DRIVERS: Final = ("asyncpg", "psycopg")

SCHEMA: Final = """
    CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
    );
    CREATE INDEX messages_by_session ON messages (session_id, id);
    CREATE INDEX messages_search ON messages USING GIN (search)"""
APPEND: Final = "INSERT INTO messages (session_id, role, content, created_at) VALUES ($1, $2, $3, $4)"
HISTORY_READ: Final = (
    "SELECT id, role, content, created_at FROM messages WHERE session_id = $1 ORDER BY id DESC LIMIT $2"
)


def text_of(writer: int, n: int) -> str:
    """A message of ordinary length with a word unique to it, so the full-text index grows as in use."""
    return f"message {n} from writer {writer}: the deploy of release w{writer}n{n} went out, " * 3


class Driver:
    """What the benchmark does through one driver's pool: run the schema, append a row, read a session's history."""

    name = ""

    async def open(self, dsn: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def script(self, sql: str) -> None:
        raise NotImplementedError

    async def append(self, session_id: str, role: str, content: str, at: float) -> None:
        raise NotImplementedError

    async def history(self, session_id: str, limit: int) -> list[Any]:
        raise NotImplementedError

    async def count(self) -> int:
        raise NotImplementedError


async def no_reset(connection: object) -> None:
    """asyncpg's pool by default runs a reset query (unlock advisory locks, close cursors, unlisten, reset
    settings) on every release, one more round trip per append; psycopg's pool runs none. The store's
    statements leave nothing to reset, so the pool is measured as the store would configure it."""


class Asyncpg(Driver):
    name = "asyncpg"

    async def open(self, dsn: str) -> None:
        import asyncpg

        self.pool = await asyncpg.create_pool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, reset=no_reset)

    async def close(self) -> None:
        await self.pool.close()

    async def script(self, sql: str) -> None:
        await self.pool.execute(sql)

    async def append(self, session_id: str, role: str, content: str, at: float) -> None:
        await self.pool.execute(APPEND, session_id, role, content, at)

    async def history(self, session_id: str, limit: int) -> list[Any]:
        return list(await self.pool.fetch(HISTORY_READ, session_id, limit))

    async def count(self) -> int:
        return int(await self.pool.fetchval("SELECT COUNT(*) FROM messages"))


def positional(sql: str) -> str:
    """asyncpg's numbered parameters ($1) as psycopg's (%s), in the same order."""
    return re.sub(r"\$\d+", "%s", sql)


class Psycopg(Driver):
    """psycopg 3 in async mode, its pool, autocommit like asyncpg's pool; it prepares a statement by itself from
    its fifth run (``prepare_threshold``), so the timed appends run prepared as asyncpg's do."""

    name = "psycopg"

    async def open(self, dsn: str) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.pool = AsyncConnectionPool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, open=False,
                                        kwargs={"autocommit": True})  # fmt: skip
        await self.pool.open(wait=True)

    async def close(self) -> None:
        await self.pool.close()

    async def script(self, sql: str) -> None:
        async with self.pool.connection() as conn:
            for statement in sql.split(";"):
                await conn.execute(statement)

    async def append(self, session_id: str, role: str, content: str, at: float) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(positional(APPEND), (session_id, role, content, at))

    async def history(self, session_id: str, limit: int) -> list[Any]:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(positional(HISTORY_READ), (session_id, limit))
            return await cursor.fetchall()

    async def count(self) -> int:
        async with self.pool.connection() as conn:
            row = await (await conn.execute("SELECT COUNT(*) FROM messages")).fetchone()
            return int(row[0]) if row else 0


MODULES: Final[dict[str, tuple[str, type[Driver]]]] = {  # the driver's module to look for, and its class
    "asyncpg": ("asyncpg", Asyncpg),
    "psycopg": ("psycopg_pool", Psycopg),
}


async def timed(call: Callable[[], Awaitable[object]], into: list[float]) -> None:
    started = time.perf_counter()
    await call()
    into.append(time.perf_counter() - started)


async def one_round(driver: Driver, dsn: str, per_writer: int, reads: int) -> dict[str, float | int]:
    """A fresh table, WRITERS writers appending ``per_writer`` rows each, then ``reads`` history loads."""
    await driver.open(dsn)
    try:
        await driver.script("DROP TABLE IF EXISTS messages; " + SCHEMA)
        for n in range(10):  # warm the pool's connections and the drivers' statement caches on every connection
            await asyncio.gather(*(driver.append("warm", "user", text_of(0, n), 0.0) for _ in range(POOL_SIZE)))
        warm = await driver.count()
        latencies: list[float] = []

        async def writer(index: int) -> None:
            for n in range(per_writer):
                content = text_of(index, n)
                await timed(lambda: driver.append(f"session-{index}", "user", content, time.time()), latencies)

        started = time.perf_counter()
        await asyncio.gather(*(writer(i) for i in range(WRITERS)))
        elapsed = time.perf_counter() - started
        stored = await driver.count() - warm
        await driver.history("session-0", HISTORY)  # warm
        loads: list[float] = []
        for _ in range(reads):
            await timed(lambda: driver.history("session-0", HISTORY), loads)
        rows = len(await driver.history("session-0", HISTORY))
    finally:
        await driver.close()
    return {
        "appends_per_s": round(len(latencies) / elapsed), "append_p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "append_max_ms": round(max(latencies) * 1000, 2), "history_load_us": round(percentile(loads, 50) * 1e6),
        "history_rows": rows, "lost_or_duplicated": stored - WRITERS * per_writer,
    }  # fmt: skip


async def measure(server: PostgresServer, drivers: Sequence[str], *, per_writer: int, reads: int,
                  rounds: int) -> tuple[str, dict[str, dict[str, float | int]]]:  # fmt: skip
    """The loop's name and each driver's best round (most appends/s; its rows lost or duplicated summed over
    every round)."""
    dsns = {name: server.create_database(f"bench_{name}") for name in drivers}
    best: dict[str, dict[str, float | int]] = {}
    lost = dict.fromkeys(drivers, 0)
    for number in range(rounds):
        for name in drivers:
            figures = await one_round(MODULES[name][1](), dsns[name], per_writer, reads)
            say(f"  round {number + 1} {name}: {figures['appends_per_s']:,} appends/s,"
                f" p99 {figures['append_p99_ms']} ms, max {figures['append_max_ms']} ms,"
                f" history {figures['history_load_us']} us")  # fmt: skip
            lost[name] += abs(int(figures["lost_or_duplicated"]))
            if name not in best or figures["appends_per_s"] > best[name]["appends_per_s"]:
                best[name] = figures
    for name in drivers:
        best[name]["lost_or_duplicated"] = lost[name]
    return loop_name(), best


def available(name: str) -> bool:
    return importlib.util.find_spec(MODULES[name][0]) is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    add_loop_option(parser)
    args = known_args(parser, argv)
    drivers = [name for name in DRIVERS if available(name)]
    for name in DRIVERS:
        if name not in drivers:
            say(f"skipped {name}: not installed (pip install -e '.[bench]')")
    try:
        server = PostgresServer()
    except PostgresUnavailable as missing:
        say(f"skipped: {missing}")
        return 0
    if not drivers:
        say("skipped: neither asyncpg nor psycopg is installed")
        return 0
    per_writer, reads, rounds = (30, 200, 3) if args.quick else (150, 1_000, 5)
    say(f"PostgreSQL drivers: {WRITERS} writers x {per_writer} appends through a pool of {POOL_SIZE}, "
        f"{reads} history loads of {HISTORY} rows, best of {rounds} rounds each")  # fmt: skip
    steal = CpuSteal()
    server.start()
    try:
        loop, best = run(measure(server, drivers, per_writer=per_writer, reads=reads, rounds=rounds),
                         loop_factory(args.loop))  # fmt: skip
    finally:
        server.stop()
    results: dict[str, Any] = {"writers": WRITERS, "pool_size": POOL_SIZE, "loop": loop}
    for name, figures in best.items():
        results.update({f"{name}_{key}": value for key, value in figures.items() if key != "history_rows"})
    ranked = sorted(best, key=lambda name: best[name]["appends_per_s"], reverse=True)
    results["winner"] = ranked[0]
    if len(ranked) == 2:
        results["appends_ratio"] = round(best[ranked[0]]["appends_per_s"] / max(1, best[ranked[1]]["appends_per_s"]), 2)
    cpu_steal = steal.percent()
    results["cpu_steal_pct"] = round(cpu_steal, 1) if cpu_steal is not None else None
    emit(results, as_json=args.json)
    failed = any(figures["lost_or_duplicated"] for figures in best.values())
    if failed:
        say("FAIL: a driver lost or duplicated appended rows")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
