"""Helpers for tests that run Switchboard as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The test process's environment without any credentials, pointed at ``home``."""
    env = {key: value for key, value in os.environ.items() if key not in CREDENTIAL_VARIABLES}
    env["SWITCHBOARD_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def switchboard(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (``python -m gateway.cli ...``)."""
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=REPO,
        env=clean_env(home, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_log(path: Path, pattern: str, *, process: subprocess.Popen[str], limit: float = 120.0) -> re.Match[str]:
    """Poll a log file until a line matches; fails early if the process dies. The limit only stops a hang."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                match = regex.search(line)
                if match:
                    return match
        if process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before logging {pattern!r}")
        time.sleep(0.05)
    raise AssertionError(f"no log line matched {pattern!r} within {limit}s")


async def until(predicate: Callable[[], bool], process: subprocess.Popen[bytes], what: str, *, limit: float) -> None:
    """Wait for ``predicate()`` while ``process`` lives; ``limit`` (seconds) only stops a hang."""
    deadline = time.monotonic() + limit
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"the gateway exited with {process.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {limit:g}s")
        await asyncio.sleep(0.02)


async def terminate(process: subprocess.Popen[bytes], *, limit: float) -> int:
    """SIGTERM, then the exit status; SIGKILL if it has not exited within ``limit`` seconds (a hang)."""
    process.send_signal(signal.SIGTERM)
    try:
        return await asyncio.to_thread(process.wait, limit)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
