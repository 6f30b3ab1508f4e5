"""Cluster benchmark: turns per second with 1, 2 and 3 gateways on one PostgreSQL, and how long the Telegram
poller's lease takes to move when its owner is killed.

``python -m bench.cluster [--quick] [--json]``

Real ``switchboard run`` processes (``tests/e2e_cluster/replicas.py``) against the Telegram emulator and
a fake model that answers at once (``"re: " + the user's text``), all on this machine, on a throwaway
PostgreSQL server the benchmark starts (skipped, saying why, without the PostgreSQL binaries).

1. Throughput. Telegram in webhook mode behind a round-robin balancer, so each replica takes its share of
   the updates. CHATS people each write a message and wait for its answer before writing the next (a
   closed loop: every message is one turn), first one round to warm every replica up, then PER_CHAT
   timed rounds. ``turns_per_s_N`` = timed turns / the time they took, with N replicas in cluster mode on
   a fresh database; ``turns_per_s_sqlite`` is the baseline of the same run: one gateway on SQLite,
   cluster off, behind the same balancer. The gateways keep to Telegram's published send limits (30
   messages a second for the bot in all, one a second per chat; the emulator enforces none), and replicas
   share the bot's 30 (each sends its share), so no number of replicas passes 30 turns/s here whatever
   their speed: a figure near that cap is flagged, and there are enough chats that the per-chat limit
   does not bind.
2. Failover. Three replicas in polling mode with the cluster's default timings (``--quick``: shorter
   ones, printed), people writing as above. KILLS times: the replica holding the poller's lease is
   SIGKILLed; ``failover_s`` runs from the kill to the first getUpdates after it (only the lease's new
   holder polls); the killed replica is started again before the next kill. ``failover_s_p50`` is the
   median.

Over both, ``lost`` (messages no reply names), ``duplicated`` (messages named by two replies) and
``out_of_order`` (chats whose replies name their messages in another order than sent) must be 0.
Targets: ``turns_per_s_3 >= 0.7 x turns_per_s_1`` (on a 2-core machine the three replicas share the
cores with PostgreSQL: no collapse, not a speed-up), failover p50 <= 20 s, 0 lost / duplicated / out of
order. The exit status is non-zero when a message was lost, duplicated or answered out of order.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import CpuSteal, emit, parse_args, say
from tests.e2e_cluster.conversations import Load, echo, tally
from tests.e2e_cluster.replicas import QUICK_TIMINGS, Cluster, polling_now
from tests.fakes.model_server import ModelServer
from tests.fakes.postgres_server import PostgresServer, PostgresUnavailable
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

CHATS, QUICK_CHATS = 90, 60
PER_CHAT, QUICK_PER_CHAT = 5, 2
FAILOVER_CHATS = 30
KILLS, QUICK_KILLS = 5, 1
TELEGRAM_CAP = 30
"""Messages a second one gateway sends to Telegram at most (the Bot API's published overall limit, which the
gateway keeps to, per process); each chat also gets at most one a second."""
DEFAULT_TIMINGS = {"heartbeat_every": 5.0, "expire_after": 15.0, "scan_every": 2.0}
"""The cluster's defaults (config/cluster.py): what an operator gets without tuning."""
SHORT_TIMINGS = {"heartbeat_every": 1.0, "expire_after": 4.0, "scan_every": 1.0}
HANG_GUARD_S = 120.0
TARGETS = {
    "turns_per_s_3": ">= 0.7 x turns_per_s_1",
    "failover_s_p50": "<= 20",
    "lost": "0",
    "duplicated": "0",
    "out_of_order": "0",
}


class Run:
    """One fresh emulator and database per measurement, so no run sees another's updates or sessions."""

    def __init__(self, tmp: Path, model: ModelServer, server: PostgresServer | None, label: str) -> None:
        self.tmp, self.model, self.server, self.label = tmp / label, model, server, label
        self.telegram = TelegramAPI()
        self.database = f"bench_{label}"

    async def __aenter__(self) -> Run:
        await self.telegram.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.telegram.stop()
        if self.server is not None:
            await asyncio.to_thread(self.server.drop_database, self.database)

    async def dsn(self) -> str:
        assert self.server is not None
        return await asyncio.to_thread(self.server.create_database, self.database)


async def converse(load: Load, telegram: TelegramAPI, rounds: range) -> None:
    """Each chat writes its messages of ``rounds``, one at a time, each after the answer to the one before; a
    chat whose answer does not come within the hang guard stops (the message counts as lost)."""

    async def chat(number: int) -> None:
        user = load.user(number).id
        for m in rounds:
            tag = f"c{number:02d}-m{m:02d}"
            load.sent[tag] = await telegram.say(load.user(number), tag)
            try:
                await telegram.wait_for(lambda t=tag: any(t in r.text for r in telegram.sent_to(user)),
                                        timeout=HANG_GUARD_S)  # fmt: skip
            except TimeoutError:
                return

    await asyncio.gather(*(chat(c) for c in range(load.chats)))


async def throughput(run: Run, *, replicas: int, chats: int, per_chat: int) -> tuple[float, Any]:
    """Turns per second through ``replicas`` gateways (0: one on SQLite, cluster off), and the tally."""
    load = Load(chats, per_chat + 1)  # round 0 warms up
    dsn = await run.dsn() if replicas else None
    cluster = Cluster(run.tmp, run.telegram, run.model, dsn, size=max(replicas, 1), mode="webhook",
                      cluster=bool(replicas), timings=SHORT_TIMINGS)  # fmt: skip
    try:
        await cluster.start()
        await converse(load, run.telegram, range(1))
        started = time.perf_counter()
        await converse(load, run.telegram, range(1, per_chat + 1))
        elapsed = time.perf_counter() - started
    finally:
        await cluster.stop()
    return chats * per_chat / elapsed, tally(load, run.telegram)


async def failover(run: Run, *, kills: int, chats: int, timings: dict[str, float]) -> tuple[list[float], Any]:
    """Seconds from each SIGKILL of the poller's owner to the next getUpdates, and the tally of the whole run."""
    load = Load(chats, 2 * kills + 1)
    cluster = Cluster(run.tmp, run.telegram, run.model, await run.dsn(), size=3, mode="polling", timings=timings)
    moved: list[float] = []
    try:
        await cluster.start()
        await converse(load, run.telegram, range(1))
        for kill in range(kills):
            owner = cluster.named(await eventually(cluster.poller, "the poller's owner", timeout=HANG_GUARD_S))
            talking = asyncio.create_task(converse(load, run.telegram, range(2 * kill + 1, 2 * kill + 3)))
            await asyncio.sleep(0)  # the first of these messages is on its way as the owner dies
            killed_at = time.monotonic()
            await owner.kill()
            polls = await eventually(lambda: polling_now(run.telegram, killed_at), "a getUpdates after the kill",
                                     timeout=HANG_GUARD_S)  # fmt: skip
            moved.append(polls[0] - killed_at)
            await talking
            say(f"  kill {kill + 1}: {owner.name} held the poller; the next getUpdates came {moved[-1]:.2f} s later")
            if kill + 1 < kills:
                owner.start()
                await owner.wait_log("gateway.started")
    finally:
        await cluster.stop()
    return moved, tally(load, run.telegram)


async def measure(quick: bool, tmp: Path, server: PostgresServer) -> dict[str, Any]:
    chats, per_chat = (QUICK_CHATS, QUICK_PER_CHAT) if quick else (CHATS, PER_CHAT)
    timings = SHORT_TIMINGS if quick else DEFAULT_TIMINGS
    model = ModelServer()
    await model.start()
    echo(model)  # latency 0: the model costs nothing, the gateways and the database are what is measured
    rates: dict[str, float] = {}
    tallies = []
    steal = CpuSteal()
    try:
        for label, replicas in (("sqlite", 0), ("1", 1), ("2", 2), ("3", 3)):
            began = time.perf_counter()
            async with Run(tmp, model, server if replicas else None, f"tput_{label}") as run:
                rates[label], counted = await throughput(run, replicas=replicas, chats=chats, per_chat=per_chat)
            tallies.append(counted)
            say(described(replicas, rates[label], f"{chats} chats x {per_chat} turns", time.perf_counter() - began))
        say(f"failover: {QUICK_KILLS if quick else KILLS} kill(s) of the poller's owner, timings {timings}")
        async with Run(tmp, model, server, "failover") as run:
            moved, counted = await failover(run, kills=QUICK_KILLS if quick else KILLS, chats=FAILOVER_CHATS,
                                            timings=timings)  # fmt: skip
        tallies.append(counted)
    finally:
        await model.stop()
    return {
        "turns_per_s_1": rates["1"],
        "turns_per_s_2": rates["2"],
        "turns_per_s_3": rates["3"],
        "turns_per_s_sqlite": rates["sqlite"],
        "failover_s_p50": statistics.median(moved),
        "failover_s_max": max(moved),
        "kills": len(moved),
        "expire_after_s": timings["expire_after"],
        "scan_every_s": timings["scan_every"],
        "lost": sum(len(t.lost) for t in tallies),
        "duplicated": sum(len(t.duplicated) for t in tallies),
        "out_of_order": sum(len(t.out_of_order) for t in tallies),
        "chats": chats,
        "telegram_cap_per_bot": TELEGRAM_CAP,
        "turns_per_run": chats * per_chat,
        "cpu_steal_pct": steal.percent(),
        "quick": quick,
    }


def described(replicas: int, rate: float, load: str, took: float) -> str:
    """One throughput figure in words, flagged when it sits at Telegram's send limit."""
    who = f"{replicas} replica(s) on PostgreSQL" if replicas else "one gateway on SQLite"
    line = f"{who}: {rate:.1f} turns/s ({load}; {took:.0f} s with the start and stop)"
    if rate >= 0.85 * TELEGRAM_CAP:
        line += f"  [near Telegram's send limit, {TELEGRAM_CAP}/s for the bot however many replicas send]"
    return line


def verdicts(figures: dict[str, Any]) -> dict[str, bool]:
    return {
        "turns_per_s_3": figures["turns_per_s_3"] >= 0.7 * figures["turns_per_s_1"],
        "failover_s_p50": figures["failover_s_p50"] <= 20.0,
        "lost": figures["lost"] == 0,
        "duplicated": figures["duplicated"] == 0,
        "out_of_order": figures["out_of_order"] == 0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__.split("\n", 1)[0], argv)
    try:
        server = PostgresServer()
    except PostgresUnavailable as missing:
        say(f"bench.cluster skipped: {missing}")
        emit({"skipped": str(missing)}, as_json=args.json)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        server.start()
        try:
            figures = asyncio.run(measure(args.quick, Path(tmp), server))
        finally:
            server.stop()
    held = verdicts(figures)
    say("targets: " + ", ".join(f"{key} {TARGETS[key]}: {'ok' if ok else 'MISSED'}" for key, ok in held.items()))
    emit(figures, as_json=args.json, targets=TARGETS)
    return 0 if held["lost"] and held["duplicated"] and held["out_of_order"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
