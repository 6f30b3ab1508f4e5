"""Crash benchmark: SIGKILL the real gateway process mid-burst, restart it, and account for every message.

``python -m bench.crash [--quick] [--json]``

The scenario of ``tests/gateway/test_crash.py`` (issue 5, "Durability"), run
for several rounds and timed. The gateway runs as a real subprocess
(``tests.fakes.run_gateway`` with the relay adapter); the platform
(``tests.fakes.relay_platform``) and the fake model server
(``tests.fakes.model_server``, answering ``"re: " + the turn's user text``
after 0.1 s of think time) live in this process, so they survive the kill:
the platform keeps the updates not yet acknowledged and every reply delivered.

A burst of CHATS x PER_CHAT messages (20 x 10, as in the test) arrives round
robin, one message per chat then a 0.1 s pause. ROUNDS rounds (6; ``--quick``
3), each run twice on fresh homes:

1. Baseline: the burst with no crash. ``baseline_drain_ms`` = first message
   posted -> last reply needed to answer every message.
2. Crash: the same burst; once replies naming a share of the messages were
   delivered (the share moves from round to round, so the kill lands at
   different points), the gateway gets SIGKILL while the burst keeps arriving,
   and a new process is started on the same home. The kill goes out as soon as
   the platform has accepted the reply that reaches the share, while other
   chats' replies are in flight, so it often falls inside the send -> record
   window (``chunks_resent`` is a pessimistic figure).
   ``restart_to_started_ms`` (new process -> ``gateway.started`` logged; that
   line comes after the outbox resume and the inbox replay were set going, so
   the first reply can precede it),
   ``restart_to_first_reply_ms`` (new process -> its first reply) and
   ``drain_after_restart_ms`` (new process -> the last reply needed);
   ``crash_total_ms`` = first message posted -> that last reply, and
   ``recovery_overhead_ms`` = crash_total_ms - the same round's baseline.

After each run the gateway is stopped with SIGTERM (its outbox flushed) and the
replies are counted: ``lost`` (messages no reply names), ``answered_twice``
(messages named by two different delivered replies, i.e. two turns),
``chunks_resent`` (a chunk sent again with the nonce of one the platform had
already accepted: the kill fell between the platform accepting the chunk and
the outbox recording it; the relay drops the repeat, a platform without
idempotency would show it twice), ``in_order`` (each chat's messages answered
in the order sent) and ``unfinished`` (inbox events not done or outbox chunks
not sent, left in the database after the clean stop). The benchmark exits
non-zero if any message is lost or answered twice, in any run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from bench.common import parse_args, say
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.relay_platform import RelayPlatform, Sent
from tests.gateway.processes import REPO, clean_env

CHATS = 20
PER_CHAT = 10
ROUNDS, QUICK_ROUNDS = 6, 3
KILL_SHARES = (0.2, 0.1, 0.3, 0.15, 0.4, 0.25)
"""Share of the burst named by delivered replies before the kill, by round (cycled)."""
THINK_S = 0.1
FEED_PAUSE_S = 0.1
QUIET_S = 5.0
"""Once the burst is in, stop waiting for replies when none came for this long (a lost message)."""
HANG_GUARD_S = 120.0
TAG = re.compile(r"c(\d\d)-m(\d\d)")


# -- the platform, with delivery times --------------------------------------------------------------


class TimedRelay(RelayPlatform):
    """The relay platform, also noting when each reply was accepted (``perf_counter``)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at: list[float] = []

    async def _send(self, request: web.Request) -> web.Response:
        response = await super()._send(request)
        now = time.perf_counter()
        self.sent_at.extend([now] * (len(self.sent) - len(self.sent_at)))
        return response


def burst(per_chat: int) -> list[tuple[str, str]]:
    """``(chat, text)`` in arrival order: round robin over the chats, each chat's messages numbered."""
    return [(f"chat-{c:02d}", f"c{c:02d}-m{m:02d}") for m in range(per_chat) for c in range(CHATS)]


def named(replies: Sequence[Sent]) -> Counter[str]:
    """How many delivered replies name each message."""
    return Counter(match.group(0) for reply in replies for match in TAG.finditer(reply.text))


async def feed(relay: RelayPlatform, messages: Sequence[tuple[str, str]]) -> None:
    for index, (chat, text) in enumerate(messages, 1):
        await relay.post(chat, text)
        if index % CHATS == 0:
            await asyncio.sleep(FEED_PAUSE_S)


# -- the gateway process ----------------------------------------------------------------------------


def write_config(home: Path, server: ModelServer) -> Path:
    """The test suite's gateway config (``tests/gateway/conftest.py``), without importing pytest fixtures."""
    config = {
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "api_key": "test", "base_url": server.base_url},
        "sessions": {"debounce_ms": 0},
        "health": {"port": 0},
        "logging": {"console": False},
        "gateway": {"drain_timeout": 2},
    }
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


class Gateway:
    """One gateway process on ``home``; its log is read from where it started.

    With ``relay``, ``tests.fakes.run_gateway`` with the relay adapter; without, the plain
    ``switchboard run`` (``python -m gateway.operations.cli run``) with the platforms of the config.
    """

    def __init__(self, home: Path, config: Path, relay: RelayPlatform | None = None) -> None:
        self.home = home
        self.log = home / "logs" / "gateway.log"
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        self.started_at = time.perf_counter()
        if relay is not None:
            command = ["tests.fakes.run_gateway", "--config", str(config), "--relay", relay.base_url]
        else:
            command = ["gateway.operations.cli", "run", "--config", str(config)]
        with (home / "stderr.txt").open("ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *command],
                cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip

    def log_text(self) -> str:
        if not self.log.exists():
            return ""
        with self.log.open("rb") as f:
            f.seek(self.offset)
            return f.read().decode("utf-8", errors="replace")

    def alive(self, what: str) -> None:
        if self.process.poll() is not None:
            tail = (self.home / "stderr.txt").read_text("utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"benchmark broken: the gateway exited with {self.process.returncode} "
                               f"while waiting for {what}\n{tail}")  # fmt: skip

    async def wait_started(self) -> float:
        """Wait for ``gateway.started``; seconds since the process was started."""
        deadline = time.perf_counter() + HANG_GUARD_S
        while "gateway.started" not in self.log_text():
            self.alive("gateway.started")
            if time.perf_counter() > deadline:
                raise RuntimeError("benchmark broken: the gateway did not start")
            await asyncio.sleep(0.01)
        return time.perf_counter() - self.started_at

    async def kill(self) -> None:
        self.process.kill()
        await asyncio.to_thread(self.process.wait)

    async def terminate(self) -> int:
        """SIGTERM (the gateway drains and flushes its outbox), then the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.process.wait, HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            await self.kill()
            raise RuntimeError("benchmark broken: the gateway did not stop on SIGTERM") from None


async def wait_for(relay: RelayPlatform, gateway: Gateway, predicate: Any, what: str) -> None:
    """Wait until ``predicate()`` holds, woken by each send; fails if the gateway dies or hangs."""
    deadline = time.perf_counter() + HANG_GUARD_S
    while True:
        with contextlib.suppress(TimeoutError):
            await relay.wait_until(predicate, timeout=0.25)
            return
        gateway.alive(what)
        if time.perf_counter() > deadline:
            raise RuntimeError(f"benchmark broken: gave up waiting for {what}")


async def wait_answered(relay: TimedRelay, gateway: Gateway, texts: set[str], feeder: asyncio.Task[None]) -> None:
    """Until a reply names every message, or (the burst being in) no reply came for QUIET_S: something was lost."""
    deadline = time.perf_counter() + HANG_GUARD_S
    while not texts <= set(named(relay.sent)):
        gateway.alive("the replies")
        last = max(relay.sent_at, default=gateway.started_at)
        now = time.perf_counter()
        if feeder.done() and now - max(last, gateway.started_at) > QUIET_S or now > deadline:
            return
        with contextlib.suppress(TimeoutError):
            count = len(relay.sent)
            await relay.wait_until(lambda: len(relay.sent) > count, timeout=0.25)


# -- one run ----------------------------------------------------------------------------------------


def account(relay: TimedRelay, messages: Sequence[tuple[str, str]], db: Path) -> dict[str, Any]:
    """Count the replies against the messages, and what the database left unfinished."""
    texts = {text for _, text in messages}
    counts = named(relay.sent)
    order_ok = True
    for chat in {chat for chat, _ in messages}:
        numbers = [int(m.group(2)) for r in relay.sent if r.chat_id == chat for m in TAG.finditer(r.text)]
        order_ok &= numbers == sorted(set(numbers))
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        unfinished = conn.execute("SELECT count(*) FROM inbox WHERE status != 'done'").fetchone()[0]
        unfinished += conn.execute("SELECT count(*) FROM outbox WHERE status != 'sent'").fetchone()[0]
    return {
        "messages": len(messages),
        "replies": len(relay.sent),
        "lost": len(texts - set(counts)),
        "answered_twice": sum(1 for text, n in counts.items() if n > 1),
        "chunks_resent": len(relay.repeats),
        "in_order": order_ok,
        "unfinished": unfinished,
    }


def last_needed(relay: TimedRelay, texts: set[str]) -> float:
    """When the reply that completed the set of answered messages was delivered."""
    seen: set[str] = set()
    for reply, at in zip(relay.sent, relay.sent_at, strict=True):
        seen.update(m.group(0) for m in TAG.finditer(reply.text))
        if texts <= seen:
            return at
    return relay.sent_at[-1] if relay.sent_at else time.perf_counter()


async def baseline_run(home: Path, server: ModelServer, per_chat: int) -> dict[str, Any]:
    messages = burst(per_chat)
    texts = {text for _, text in messages}
    relay = TimedRelay()
    await relay.start()
    try:
        config = write_config(home, server)
        gateway = Gateway(home, config, relay)
        try:
            await gateway.wait_started()
            fed_from = time.perf_counter()
            feeder = asyncio.create_task(feed(relay, messages))
            await wait_answered(relay, gateway, texts, feeder)
            await feeder
        finally:
            code = await gateway.terminate()
        figures = account(relay, messages, home / "state.db")
        figures["baseline_drain_ms"] = (last_needed(relay, texts) - fed_from) * 1000
        figures["exit_code"] = code
        return figures
    finally:
        await relay.stop()


async def crash_run(home: Path, server: ModelServer, per_chat: int, kill_share: float) -> dict[str, Any]:
    messages = burst(per_chat)
    texts = {text for _, text in messages}
    kill_after = max(1, round(kill_share * len(messages)))
    relay = TimedRelay()
    await relay.start()
    feeder: asyncio.Task[None] | None = None
    try:
        config = write_config(home, server)
        first = Gateway(home, config, relay)
        try:
            await first.wait_started()
            fed_from = time.perf_counter()
            feeder = asyncio.create_task(feed(relay, messages))
            await wait_for(relay, first, lambda: len(named(relay.sent)) >= kill_after, "the first answers")
        finally:
            await first.kill()
        mid_burst = not feeder.done()
        answered_at_kill, posted_at_kill = len(named(relay.sent)), len(relay.updates)
        replies_before = len(relay.sent)

        second = Gateway(home, config, relay)
        try:
            started_s = await second.wait_started()
            await wait_answered(relay, second, texts, feeder)
            await feeder
        finally:
            code = await second.terminate()
        log = second.log_text()
    finally:
        if feeder is not None:
            feeder.cancel()
        await relay.stop()
    figures = account(relay, messages, home / "state.db")
    done_at = last_needed(relay, texts)
    first_after = relay.sent_at[replies_before] if len(relay.sent_at) > replies_before else done_at
    replayed = re.search(r"gateway\.started .*replayed=(\d+)", log)
    figures.update({
        "kill_after": kill_after,
        "answered_at_kill": answered_at_kill,
        "posted_at_kill": posted_at_kill,
        "mid_burst": mid_burst,
        "replayed": int(replayed.group(1)) if replayed else 0,
        "restart_to_started_ms": started_s * 1000,
        "restart_to_first_reply_ms": (first_after - second.started_at) * 1000,
        "drain_after_restart_ms": (done_at - second.started_at) * 1000,
        "crash_total_ms": (done_at - fed_from) * 1000,
        "exit_code": code,
    })  # fmt: skip
    return figures


# -- the rounds -------------------------------------------------------------------------------------


async def measure(quick: bool, tmp: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    per_chat, rounds = PER_CHAT, (QUICK_ROUNDS if quick else ROUNDS)
    server = ModelServer()
    await server.start()
    server.responder = lambda record: Text("re: " + record.last_user_text)
    server.latency = THINK_S
    results: list[dict[str, Any]] = []
    try:
        for index in range(rounds):
            base = await baseline_run(tmp / f"round{index}" / "baseline", server, per_chat)
            crash = await crash_run(tmp / f"round{index}" / "crash", server, per_chat,
                                    KILL_SHARES[index % len(KILL_SHARES)])  # fmt: skip
            crash["baseline_drain_ms"] = base["baseline_drain_ms"]
            crash["recovery_overhead_ms"] = crash["crash_total_ms"] - base["baseline_drain_ms"]
            kept = ("replies", "lost", "answered_twice", "in_order", "unfinished", "exit_code")
            crash["baseline"] = {k: base[k] for k in kept}
            results.append(crash)
            say(f"round {index + 1}: {crash['messages']} msgs, killed at {crash['answered_at_kill']} answered / "
                f"{crash['posted_at_kill']} posted{'' if crash['mid_burst'] else ' (burst already in)'}, "
                f"replayed {crash['replayed']}; replies {crash['replies']}, lost {crash['lost']}, "
                f"answered twice {crash['answered_twice']}, chunks resent {crash['chunks_resent']}, "
                f"in order {crash['in_order']}; restart->first reply {crash['restart_to_first_reply_ms']:.0f} ms, "
                f"->drained {crash['drain_after_restart_ms']:.0f} ms; total {crash['crash_total_ms']:.0f} ms "
                f"vs baseline {base['baseline_drain_ms']:.0f} ms "
                f"(+{crash['recovery_overhead_ms']:.0f} ms)")  # fmt: skip
            if base["lost"] or base["answered_twice"]:
                say(f"  baseline run FAILED: lost {base['lost']}, answered twice {base['answered_twice']}")
    finally:
        await server.stop()

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    aggregate = {
        "rounds": rounds,
        "chats": CHATS,
        "messages_per_round": CHATS * per_chat,
        "messages": sum(r["messages"] for r in results),
        "replies": sum(r["replies"] for r in results),
        "lost": sum(r["lost"] for r in results),
        "answered_twice": sum(r["answered_twice"] for r in results),
        "chunks_resent": sum(r["chunks_resent"] for r in results),
        "in_order": all(r["in_order"] for r in results),
        "unfinished": sum(r["unfinished"] for r in results),
        "kills_mid_burst": sum(r["mid_burst"] for r in results),
        "unclean_exits": sum((r["exit_code"] != 0) + (r["baseline"]["exit_code"] != 0) for r in results),
        "baseline_lost": sum(r["baseline"]["lost"] for r in results),
        "baseline_answered_twice": sum(r["baseline"]["answered_twice"] for r in results),
        "restart_to_started_ms": med("restart_to_started_ms"),
        "restart_to_first_reply_ms": med("restart_to_first_reply_ms"),
        "restart_to_first_reply_max_ms": max(r["restart_to_first_reply_ms"] for r in results),
        "drain_after_restart_ms": med("drain_after_restart_ms"),
        "drain_after_restart_max_ms": max(r["drain_after_restart_ms"] for r in results),
        "crash_total_ms": med("crash_total_ms"),
        "baseline_drain_ms": med("baseline_drain_ms"),
        "recovery_overhead_ms": med("recovery_overhead_ms"),
        "model_think_ms": THINK_S * 1000,
        "quick": quick,
    }
    return aggregate, results


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    return parse_args(__doc__.splitlines()[0], argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="bench-crash-") as tmp:
        aggregate, rounds = asyncio.run(measure(args.quick, Path(tmp)))
    failed = aggregate["lost"] + aggregate["answered_twice"] + aggregate["baseline_lost"] \
        + aggregate["baseline_answered_twice"] + (not aggregate["in_order"])  # fmt: skip
    width = max(len(k) for k in aggregate)
    for key, value in aggregate.items():
        shown = f"{value:,.1f}" if isinstance(value, float) else str(value)
        note = "   (must be 0)" if key in ("lost", "answered_twice") else ""
        print(f"  {key.ljust(width)}  {shown}{note}")
    say("FAILED: messages lost, answered twice or out of order" if failed
        else "ok: every message answered exactly once, in order per chat")
    if args.json:
        print(json.dumps({**aggregate, "per_round": rounds}, sort_keys=True))
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
