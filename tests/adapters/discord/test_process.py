"""The real ``switchboard run`` process with Discord enabled: what the operator sees in gateway.log and /health.

The emulator, the fake model and a second platform (the relay) live in the test
process; the gateway runs as a subprocess with its real logging setup.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.adapters.discord.conftest import ALICE, discord_section
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer
from tests.fakes.relay_platform import RelayPlatform
from tests.gateway.processes import REPO, clean_env, terminate
from tests.waiting import eventually

pytestmark = pytest.mark.slow
HANG_GUARD = 120.0


def write_config(home: Path, model_server: ModelServer, discord: dict) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "model": {"api_key": "test", "base_url": model_server.base_url},
        "platforms": {"discord": discord},
        "sessions": {"debounce_ms": 0}, "health": {"port": 0}, "logging": {"console": False},
        "gateway": {"drain_timeout": 2},
    }  # fmt: skip
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


async def launch(home: Path, config: Path, relay: RelayPlatform) -> subprocess.Popen[bytes]:
    with (home / "stderr.txt").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config), "--relay", relay.base_url],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip


async def log_line(home: Path, needle: str, process: subprocess.Popen[bytes]) -> str:
    """The first gateway.log line containing ``needle`` (the guard only stops a hang)."""
    path = home / "logs" / "gateway.log"
    found: list[str] = []

    def check() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the gateway exited with {process.returncode} before logging {needle!r}")
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        found.extend(line for line in lines if needle in line)
        return bool(found)

    await eventually(check, timeout=HANG_GUARD)
    return found[0]




def health(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # 503 while degraded still carries the body
        return json.loads(error.read())


async def test_a_4014_is_in_the_log_and_health_while_the_other_platform_answers(
    tmp_path: Path, model_server: ModelServer, emulator: DiscordEmulator, relay: RelayPlatform
) -> None:
    home = tmp_path / "home"
    config = write_config(home, model_server, discord_section(emulator, message_content_intent=True))
    process = await launch(home, config, relay)
    try:
        url = (await log_line(home, "health.listening", process)).split("url=")[1].split()[0]
        failed = await log_line(home, "discord.failed", process)
        assert "Message Content Intent" in failed and "retrying=false" in failed
        await log_line(home, "adapter.start_failed platform=discord", process)
        intents = await log_line(home, "discord.intents", process)
        assert "message_content=true" in intents

        await relay.post("chat-1", "are you up?")
        await relay.wait_until(lambda: bool(relay.sent), timeout=HANG_GUARD)
        assert relay.sent[0].text.startswith("ok: are you up?")
        body = await asyncio.to_thread(health, url)
        assert body["adapters"]["relay"]["state"] == "running"
        assert body["adapters"]["discord"]["state"] == "failed"
        assert "Bot -> Privileged Gateway Intents -> Message Content Intent" in body["adapters"]["discord"]["detail"]
        assert emulator.gateway is not None and len(emulator.gateway.identifies) == 1
    finally:
        assert await terminate(process, limit=HANG_GUARD) == 0


async def test_discord_py_rate_limit_waits_reach_the_gateway_log(
    tmp_path: Path, model_server: ModelServer, emulator: DiscordEmulator, relay: RelayPlatform
) -> None:
    home = tmp_path / "home"
    config = write_config(home, model_server, discord_section(emulator))
    process = await launch(home, config, relay)
    try:
        await log_line(home, "discord.connected", process)
        emulator.rate_limit_next(0.2)
        message = await emulator.dm(ALICE, "hello from far away")
        (sent,) = await emulator.wait_sent(1, timeout=HANG_GUARD)
        assert str(sent.reference["message_id"]) == message["id"]
        line = await log_line(home, "We are being rate limited", process)
        assert "discord.http" in line
    finally:
        assert await terminate(process, limit=HANG_GUARD) == 0
