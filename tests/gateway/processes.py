"""Helpers for tests that run Switchboard as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import re
import subprocess
import sys
from pathlib import Path

from tests.waiting import eventually_sync

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
    """Run the CLI to completion (``python -m gateway.operations.cli ...``)."""
    return subprocess.run(
        [sys.executable, "-m", "gateway.operations.cli", *args],
        cwd=REPO,
        env=clean_env(home, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_log(path: Path, pattern: str, *, process: subprocess.Popen[str], limit: float = 120.0) -> re.Match[str]:
    """The first line of a log file that matches; fails early if the process dies. The limit only stops a hang."""
    regex = re.compile(pattern)

    def matched() -> re.Match[str] | None:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return next((match for line in lines if (match := regex.search(line))), None)

    return eventually_sync(matched, f"a log line matching {pattern!r}", process=process, timeout=limit, interval=0.05)


async def terminate(process: subprocess.Popen[bytes], *, limit: float) -> int:
    """SIGTERM, then the exit status; SIGKILL if it has not exited within ``limit`` seconds (a hang)."""
    process.send_signal(signal.SIGTERM)
    try:
        return await asyncio.to_thread(process.wait, limit)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
