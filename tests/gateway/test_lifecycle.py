"""The gateway process from start to a clean exit: /health while running, SIGTERM/SIGINT, storage closed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.gateway.processes import REPO, clean_env, wait_for_log

CONFIG = """\
model:
  api_key: test-key-not-used
health:
  host: 127.0.0.1
  port: 0
logging:
  console: false
gateway:
  drain_timeout: 5
"""


def start_gateway(home: Path, *extra: str, event_loop: str = "auto") -> subprocess.Popen[str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG + f"  event_loop: {event_loop}\n", encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.run_gateway", *extra],
        cwd=REPO,
        env=clean_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stop(process: subprocess.Popen[str], signum: int) -> tuple[int, str]:
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, err


@pytest.mark.parametrize(
    ("signum", "event_loop", "runs_on"),
    [(signal.SIGTERM, "auto", "uvloop"), (signal.SIGINT, "auto", "uvloop"), (signal.SIGTERM, "asyncio", "asyncio")],
)
def test_health_while_running_then_clean_exit_with_storage_closed(
    tmp_path: Path, signum: int, event_loop: str, runs_on: str
) -> None:
    log_path = tmp_path / "logs" / "gateway.log"
    process = start_gateway(tmp_path, event_loop=event_loop)
    try:
        url = wait_for_log(log_path, r"health\.listening url=(\S+)", process=process).group(1)
        wait_for_log(log_path, rf"gateway\.started .*loop={runs_on}", process=process)
        status, body = get_json(url)
        assert status == 200
        assert body["status"] == "ok"
        assert body["adapters"]["loopback"]["state"] == "running"
        assert body["database"] == {"ok": True}
        assert body["version"] and body["uptime_s"] >= 0
    finally:
        code, err = stop(process, signum)
    assert code == 0, err
    log = log_path.read_text(encoding="utf-8")
    assert f"shutdown.signal signal={signal.Signals(signum).name}" in log
    order = [log.index(event) for event in ("shutdown.begin", "storage.closed", "shutdown.done")]
    assert order == sorted(order)
    wal = tmp_path / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "storage was not closed cleanly"
    assert (tmp_path / "state.db").stat().st_mode & 0o777 == 0o600


def test_a_failing_adapter_is_reported_and_the_others_keep_running(tmp_path: Path) -> None:
    log_path = tmp_path / "logs" / "gateway.log"
    process = start_gateway(tmp_path, "--with-broken")
    try:
        url = wait_for_log(log_path, r"health\.listening url=(\S+)", process=process).group(1)
        wait_for_log(log_path, r"gateway\.started .*adapters=1 of=2", process=process)
        status, body = get_json(url)
        assert status == 503
        assert body["status"] == "degraded"
        assert body["adapters"]["loopback"]["state"] == "running"
        assert body["adapters"]["broken"] == {"state": "failed", "detail": "token rejected", "seconds_since_inbound": None,
                                              "probe": None, "chats": {}}  # never probed: it never ran
    finally:
        code, _ = stop(process, signal.SIGTERM)
    assert code == 0
    assert "adapter.start_failed platform=broken" in log_path.read_text(encoding="utf-8")
