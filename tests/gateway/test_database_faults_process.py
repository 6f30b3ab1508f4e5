"""The real ``switchboard run`` process and a database that fails it: a full disk while it runs, a damaged file at start."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.fakes.model_server import ModelServer, Text
from tests.fakes.relay_platform import RelayPlatform
from tests.gateway.conftest import GatewayFactory, write_config
from tests.gateway.database_damage import damage_header, damage_page_holding
from tests.gateway.processes import REPO, clean_env, terminate
from tests.waiting import eventually
from tests.gateway.test_database_faults import BIG, QUICK_RETRIES, big_echo, fill, small_disk, squeezed  # noqa: F401 - a fixture

HANG_GUARD = 120.0


def launch(home: Path, config: Path, *extra: str) -> subprocess.Popen[bytes]:
    with (home / "stderr.txt").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config), *extra],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip


def health(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # 503 while degraded: the body says why
        return json.loads(error.read())


def full_disk_tries(health_url: str) -> float:
    """``switchboard_turn_retries_total{fault="full"}`` from /metrics."""
    with urllib.request.urlopen(health_url.replace("/health", "/metrics"), timeout=10) as response:
        page = response.read().decode()
    found = re.search(r'^switchboard_turn_retries_total\{fault="full"\} (\S+)$', page, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_a_full_disk_is_reported_on_health_and_once_a_minute_in_the_log_and_the_turn_waits_for_room(
    tmp_path: Path, model_server: ModelServer, relay: RelayPlatform, small_disk: Path  # noqa: F811
) -> None:
    model_server.responder = big_echo
    home = tmp_path / "home"
    config = write_config(home, model_server, {**QUICK_RETRIES, "storage": {"path": str(small_disk / "state.db")}})
    log_path = home / "logs" / "gateway.log"
    process = launch(home, config, "--relay", relay.base_url)
    try:
        await eventually(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"), "start",
                         process=process, timeout=HANG_GUARD)  # fmt: skip
        url = re.search(r"health\.listening url=(\S+)", log_path.read_text("utf-8")).group(1)  # type: ignore[union-attr]
        await relay.post("c1", "warm up")
        await eventually(lambda: len(relay.sent) == 1, "the first reply", process=process, timeout=HANG_GUARD)
        model_server.gate = gate = asyncio.Event()
        await relay.post("c1", "first")
        await eventually(lambda: len(model_server.requests) == 2, "the turn's model call", process=process, timeout=HANG_GUARD)
        await relay.post("c1", "second")
        await eventually(lambda: not relay.unacknowledged(), "the second message stored", process=process, timeout=HANG_GUARD)
        filler = fill(small_disk)
        full_since = time.monotonic()
        gate.set()
        # Before: /health said "ok" and database ok while the turn was dropped (lane.turn_failed).
        await eventually(lambda: health(url)["status"] == "degraded", "/health degraded", process=process, timeout=HANG_GUARD)
        body = health(url)
        assert body["database"]["ok"] is False and "full" in body["database"]["reason"], body
        await eventually(lambda: len(relay.sent) == 2, "the notice", process=process, timeout=HANG_GUARD)
        await eventually(lambda: full_disk_tries(url) >= 5, "more tries against the full disk", process=process, timeout=HANG_GUARD)
        full_for = time.monotonic() - full_since
        filler.unlink()
        await eventually(lambda: relay.sent[-1].text == "re: second", "both answers", process=process, timeout=HANG_GUARD)
        await eventually(lambda: health(url)["status"] == "ok", "/health ok again", process=process, timeout=HANG_GUARD)
    finally:
        code = await terminate(process, limit=HANG_GUARD)
    assert code == 0
    texts = [sent.text for sent in relay.sent]
    assert texts[0] == "re: warm up" and "delayed" in texts[1] and texts[-1] == "re: second"
    assert squeezed("".join(texts[2:-1])) == squeezed("re: first" + BIG)  # in chunks, each once
    log = log_path.read_text("utf-8")
    assert "Traceback" not in log and "lane.turn_failed" not in log
    reported = [line for line in log.splitlines() if " database.degraded " in line]
    assert 1 <= len(reported) <= 1 + full_for // 60, reported
    assert "reason=" in reported[0] and "full" in reported[0]
    assert len(re.findall(r"storage\.\w+_failed", log)) <= 3 * (1 + full_for // 60)
    assert " database.recovered " in log


async def prepared_home(start_gateway: GatewayFactory, model_server: ModelServer) -> tuple[Path, Path]:
    """A home whose database holds a conversation, the gateway stopped (everything checkpointed)."""
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    running = await start_gateway()
    await running.adapter.inject("MARKER-STORED-MESSAGE " * 20, chat_id="old")
    await running.adapter.wait_sent(1)
    await running.gateway.shutdown()
    return running.home, running.home / "config.yaml"


async def run_to_exit(home: Path, config: Path) -> tuple[int, str, str]:
    """Start the real process and wait until it exits (or, on the old code, until it is up: then stop it)."""
    log_path = home / "logs" / "gateway.log"
    process = launch(home, config)
    try:
        await eventually(lambda: process.poll() is not None or (log_path.exists() and "gateway.started" in log_path.read_text("utf-8")),
                         "the process to exit (or, on the old code, to start)", timeout=HANG_GUARD)  # fmt: skip
    finally:
        code = process.poll()
        if code is None:
            await terminate(process, limit=HANG_GUARD)
            code = -999  # it started on a damaged database
    log = log_path.read_text("utf-8") if log_path.exists() else ""
    return code, (home / "stderr.txt").read_text("utf-8"), log


async def test_a_database_with_a_damaged_page_stops_the_start_with_what_to_do(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    home, config = await prepared_home(start_gateway, model_server)
    damage_page_holding(home / "state.db", "messages", b"MARKER-STORED-MESSAGE")
    code, stderr, log = await run_to_exit(home, config)
    # Before: it started (exit -999 here), /health said the database was ok and every turn of that chat failed.
    assert code == 2, (code, stderr[-2000:])
    assert "Traceback" not in stderr
    assert "damaged" in stderr and "switchboard restore" in stderr and "switchboard doctor" in stderr, stderr
    assert " database.damaged " in log


async def test_a_database_with_a_bad_header_stops_the_start_with_what_to_do_not_a_traceback(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    home, config = await prepared_home(start_gateway, model_server)
    damage_header(home / "state.db")
    code, stderr, log = await run_to_exit(home, config)
    # Before: exit status 1 and a raw sqlite3.DatabaseError traceback ("file is not a database").
    assert code == 2, (code, stderr[-2000:])
    assert "Traceback" not in stderr, stderr[-2000:]
    assert "not a database" in stderr and "switchboard restore" in stderr, stderr


async def test_a_database_on_a_read_only_disk_stops_the_start_with_what_to_do_and_is_not_called_damaged(
    start_gateway: GatewayFactory, model_server: ModelServer, small_disk: Path  # noqa: F811
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    running = await start_gateway({"storage": {"path": str(small_disk / "state.db")}})
    await running.adapter.inject("hello")
    await running.adapter.wait_sent(1)
    await running.gateway.shutdown()
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    code, stderr, log = await run_to_exit(running.home, running.home / "config.yaml")
    assert code == 2, (code, stderr[-2000:])
    assert "Traceback" not in stderr and "damaged" not in stderr, stderr
    assert "read-only" in stderr and "writable" in stderr, stderr
