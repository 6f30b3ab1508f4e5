"""What stops `switchboard run` at start, as the operator sees it: a port that is taken, a gateway already running.

Each case runs the real process and checks its exit status (2: fix something, do not restart),
the one line on stderr that names what to change, the same line in gateway.log, and that no
traceback was printed. A service manager that keeps restarting on status 2 cannot help
(deploy/switchboard.service stops on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.fakes.telegram_api import TelegramAPI
from tests.gateway.conftest import write_config
from tests.gateway.processes import REPO, clean_env, switchboard, terminate
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway process, several times: slow on a busy machine

HANG_GUARD = 120.0


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something else already listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def refusal(done: subprocess.CompletedProcess[str], home: Path) -> str:
    """The one reason the run gave, checked to be on stderr and in gateway.log, without a traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    reasons = [line[4:] for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert len(reasons) == 1, done.stderr
    log = (home / "logs" / "gateway.log").read_text(encoding="utf-8")
    assert "Traceback" not in log
    (logged,) = [line for line in log.splitlines() if " run.blocked " in line]
    assert " error " in logged
    assert reasons[0].split(" (")[0] in logged.replace('\\"', '"')
    return reasons[0]


def taken_port_refusal(home: Path, model_server: ModelServer, platforms: dict, port: int, setting: str, **extra: dict) -> None:
    """Run with ``platforms`` and ``extra`` config sections, where ``setting`` names the taken ``port``."""
    write_config(home, model_server, {"platforms": platforms, **extra})
    reason = refusal(switchboard("run", "--config", str(home / "config.yaml"), home=home), home)
    assert f"127.0.0.1:{port}" in reason and setting in reason, reason
    assert "address already in use" in reason and "Errno" not in reason


async def test_a_taken_health_port_stops_the_start_with_one_line_and_status_2(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, taken_port: int
) -> None:
    platforms = {"telegram": {"token": telegram_api.token, "api_base_url": telegram_api.base_url, "poll_timeout": 1}}
    await asyncio.to_thread(taken_port_refusal, tmp_path, model_server, platforms, taken_port, "health.port",
                            health={"port": taken_port})  # fmt: skip


async def test_a_taken_telegram_webhook_port_stops_the_start_with_status_2(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, taken_port: int
) -> None:
    platforms = {"telegram": {
        "token": telegram_api.token, "api_base_url": telegram_api.base_url, "mode": "webhook",
        "webhook_url": "https://bot.example.org/telegram", "webhook_secret": "s3cret-s3cret",
        "webhook_listen": {"host": "127.0.0.1", "port": taken_port},
    }}  # fmt: skip
    await asyncio.to_thread(taken_port_refusal, tmp_path, model_server, platforms, taken_port,
                            "platforms.telegram.webhook_listen.port")  # fmt: skip


async def test_a_taken_slack_events_port_stops_the_start_with_status_2(
    tmp_path: Path, model_server: ModelServer, fake_slack: FakeSlack, taken_port: int
) -> None:
    platforms = {"slack": {
        "bot_token": BOT_TOKEN, "signing_secret": "signing-secret", "mode": "http", "api_base_url": fake_slack.api_url,
        "http_listen": {"host": "127.0.0.1", "port": taken_port},
    }}  # fmt: skip
    await asyncio.to_thread(taken_port_refusal, tmp_path, model_server, platforms, taken_port,
                            "platforms.slack.http_listen.port")  # fmt: skip


# --- one gateway per home and per database -------------------------------------------------------


def launch(home: Path, config: Path) -> subprocess.Popen[str]:
    """The real ``switchboard run`` (with the in-process test platform) in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config)],
        cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def started(home: Path) -> int:
    log = home / "logs" / "gateway.log"
    return log.read_text(encoding="utf-8").count("gateway.started") if log.exists() else 0


async def stop(process: subprocess.Popen[str]) -> int:
    if process.poll() is not None:
        return process.returncode
    return await terminate(process, limit=HANG_GUARD)


@contextlib.asynccontextmanager
async def gateway_running(home: Path, config: Path) -> AsyncIterator[subprocess.Popen[str]]:
    """A gateway started on ``home`` and running; stopped afterwards, which it must do cleanly."""
    before = started(home)
    process = launch(home, config)
    try:
        await eventually(lambda: started(home) > before, "the gateway to start", process=process, timeout=HANG_GUARD)
        yield process
    finally:
        code = await stop(process)
    assert code == 0


async def refused(home: Path, config: Path) -> str:
    """Start another gateway on ``home``: the reason it gave for not starting (it must exit 2, no traceback)."""
    before = started(home)
    process = launch(home, config)
    try:
        await eventually(lambda: process.poll() is not None or started(home) > before, timeout=HANG_GUARD)
        assert process.poll() is not None, f"a second gateway started ({config})"
    finally:
        await stop(process)
    stderr = process.stderr.read() if process.stderr else ""
    assert process.returncode == 2 and "Traceback" not in stderr, stderr
    (reason,) = [line[4:] for line in stderr.splitlines() if line.startswith("  - ")]
    return reason


async def test_a_second_gateway_on_the_same_home_refuses_and_names_the_first_ones_pid(
    tmp_path: Path, model_server: ModelServer
) -> None:
    home = tmp_path / "home"
    config = write_config(home, model_server)
    async with gateway_running(home, config) as first:
        reason = await refused(home, config)
        assert re.search(rf"\bpid {first.pid}\b", reason) and str(home) in reason, reason
        log = (home / "logs" / "gateway.log").read_text(encoding="utf-8")
        assert re.search(rf"run\.blocked .*pid {first.pid}\b", log), log[-2000:]

        # The commands an operator runs beside the gateway still work.
        backup = await asyncio.to_thread(switchboard, "backup", str(tmp_path / "backups"), "--config", str(config),
                                         home=home)  # fmt: skip
        assert backup.returncode == 0, backup.stderr
        listed = await asyncio.to_thread(switchboard, "sessions", "list", "--config", str(config), home=home)
        assert listed.returncode == 0, listed.stderr
        assert first.poll() is None, "the first gateway must keep running"


async def test_a_gateway_of_another_home_on_the_same_database_refuses(tmp_path: Path, model_server: ModelServer) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    config = write_config(home, model_server)
    other_config = write_config(other, model_server, {"storage": {"path": str(home / "state.db")}})
    async with gateway_running(home, config) as first:
        reason = await refused(other, other_config)
        assert re.search(rf"\bpid {first.pid}\b", reason) and str(home / "state.db") in reason, reason


async def test_a_gateway_of_another_home_on_the_same_postgresql_database_refuses(
    tmp_path: Path, model_server: ModelServer, postgres_dsn: str
) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    config = write_config(home, model_server, {"storage": {"url": postgres_dsn}})
    other_config = write_config(other, model_server, {"storage": {"url": postgres_dsn}})
    async with gateway_running(home, config) as first:
        reason = await refused(other, other_config)
        assert f"switchboard gateway pid {first.pid} on " in reason and "another gateway runs on the database" in reason
        assert first.poll() is None, "the first gateway must keep running"
    async with gateway_running(other, other_config):  # the first stopped: the lock went with it
        pass


async def test_the_lock_of_a_killed_gateway_does_not_keep_the_next_one_out(tmp_path: Path, model_server: ModelServer) -> None:
    home = tmp_path / "home"
    config = write_config(home, model_server)
    first = launch(home, config)
    try:
        await eventually(lambda: started(home) == 1, "the first gateway", process=first, timeout=HANG_GUARD)
    finally:
        first.kill()
        await asyncio.to_thread(first.wait)
    assert first.returncode == -signal.SIGKILL
    lock_files = sorted(path.name for path in home.glob("*.lock"))
    assert lock_files, "the gateway keeps no lock file in its home"
    async with gateway_running(home, config) as again:
        for name in lock_files:
            assert str(again.pid) in (home / name).read_text(encoding="utf-8")


async def test_replicas_in_cluster_mode_run_together_on_one_database_and_a_gateway_without_it_is_refused(
    tmp_path: Path, model_server: ModelServer, postgres_dsn: str
) -> None:
    def replica(name: str) -> tuple[Path, Path]:
        home = tmp_path / name
        return home, write_config(home, model_server, {"storage": {"url": postgres_dsn},
                                                       "cluster": {"enabled": True, "replica_id": name}})  # fmt: skip

    alone = tmp_path / "alone"
    alone_config = write_config(alone, model_server, {"storage": {"url": postgres_dsn}})
    async with gateway_running(*replica("r1")) as first, gateway_running(*replica("r2")):
        reason = await refused(alone, alone_config)
        assert "replicas in cluster mode run on the database" in reason and f"pid {first.pid} on " in reason, reason
        assert "cluster.enabled: true" in reason, reason
    async with gateway_running(alone, alone_config):  # the replicas stopped
        reason = await refused(*replica("r3"))
        assert "another gateway runs on the database" in reason and "cluster.enabled is off" in reason, reason
