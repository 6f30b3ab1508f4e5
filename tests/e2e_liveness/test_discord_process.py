"""The real ``switchboard run`` process with Discord going deaf: noticed, reconnected, caught up, and alerted.

The Discord and Telegram emulators, the fake model and the alert webhook receiver live in the test
process; the gateway runs as a subprocess with its real logging, /health, liveness monitor, catch-up
and alerts. Telegram is the operator's alert chat (``alerts.chats``).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.discord.conftest import ALICE, discord_section
from tests.adapters.discord.test_process import health, launch
from tests.fakes.discord_api import DiscordEmulator, SentMessage
from tests.fakes.model_server import ModelServer
from tests.fakes.relay_platform import RelayPlatform
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.builders import Chat, User
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.gateway.conftest import write_config
from tests.gateway.processes import terminate
from tests.waiting import eventually

pytestmark = pytest.mark.slow
HANG_GUARD = 120.0
OPS_CHAT = 4242
HOOK_TOKEN = "Bearer hook-secret-5e6f7a8b"


def config_for(home: Path, model_server: ModelServer, discord: DiscordEmulator, telegram: TelegramAPI,
               receiver: WebhookReceiver) -> Path:  # fmt: skip
    """Discord and Telegram (the alert chat's platform), quick liveness probes, alerts at once."""
    return write_config(home, model_server, {
        "platforms": {
            "discord": discord_section(discord),
            "telegram": {"token": telegram.token, "api_base_url": telegram.base_url, "allowed_users": ["1"],
                         "poll_timeout": 1, "stall_timeout": 2},
            "slack": {"enabled": False},
        },
        "liveness": {"idle_probe_after": 3, "check_every": 0.2, "probe_timeout": 10},
        "alerts": {"chats": [f"telegram:{OPS_CHAT}"], "degraded_after_minutes": 0,
                   "webhooks": [{"url": receiver.url(), "headers": {"Authorization": HOOK_TOKEN}}]},
    })  # fmt: skip


def log_lines(home: Path, needle: str) -> list[str]:
    path = home / "logs" / "gateway.log"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line for line in lines if needle in line]


async def log_line(home: Path, needle: str, process: subprocess.Popen[bytes]) -> str:
    """The first gateway.log line holding ``needle`` (the guard only stops a hang)."""
    return (await eventually(lambda: log_lines(home, needle), f"a log line with {needle!r}", timeout=HANG_GUARD,
                             process=process))[0]  # fmt: skip


def fields(line: str) -> dict[str, str]:
    """The ``key=value`` pairs of a gateway.log line (quotes taken off)."""
    return {key: value.strip('"') for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', line)}


def catch_ups(home: Path, platform: str, *, at_start: bool = False) -> list[dict[str, str]]:
    """The ``adapter.catchup`` lines of ``platform``: those of the catch-up at start, or the others."""
    lines = [fields(line) for line in log_lines(home, f"adapter.catchup platform={platform} ")]
    return [line for line in lines if (line["reason"] == "the gateway started") == at_start]


def replies_to(emulator: DiscordEmulator, message: dict[str, Any]) -> list[SentMessage]:
    return [sent for sent in emulator.world.sent
            if sent.reference is not None and str(sent.reference.get("message_id")) == message["id"]]  # fmt: skip


def asked(server: ModelServer, text: str) -> int:
    """How many model requests ended with a user message holding ``text``."""
    return sum(text in str(request.body["messages"][-1]["content"]) for request in server.requests)


async def test_a_deaf_discord_is_degraded_reconnected_caught_up_and_alerted_once_then_recovered(
    tmp_path: Path, model_server: ModelServer, emulator: DiscordEmulator, telegram_api: TelegramAPI,
    receiver: WebhookReceiver, relay: RelayPlatform,
) -> None:  # fmt: skip
    home = tmp_path / "home"
    telegram_api.add_chat(Chat.private(User(id=OPS_CHAT, first_name="Ops")))  # the operator's DM with the bot
    process = await launch(home, config_for(home, model_server, emulator, telegram_api, receiver), relay)
    assert emulator.gateway is not None
    try:
        url = (await log_line(home, "health.listening", process)).split("url=")[1].split()[0]
        await log_line(home, "discord.connected", process)
        first = await emulator.dm(ALICE, "hello, are you there?")
        await eventually(lambda: replies_to(emulator, first), "the first message to be answered", process=process)

        emulator.gateway.deaf = True  # the socket stays up and heartbeats are answered; no message reaches the bot
        emulator.gateway.hold()  # and the next connection takes a while to come up, long enough for an alert
        missed = [await emulator.dm(ALICE, "what is the tallest mountain?"),
                  await emulator.dm(ALICE, "and the deepest lake?")]  # fmt: skip

        def degraded() -> dict[str, Any] | None:
            entry = health(url)["adapters"]["discord"]
            probe = entry.get("probe") or {}
            return entry if entry["state"] == "degraded" and probe.get("ok") is False else None

        entry = await eventually(lambda: asyncio.to_thread(degraded), "/health to show discord degraded",
                                 timeout=HANG_GUARD, process=process)  # fmt: skip
        assert "never received" in entry["probe"]["detail"] and missed[0]["id"] in entry["probe"]["detail"]
        assert "liveness probe failed" in entry["detail"]
        failed = await log_line(home, "adapter.probe_failed platform=discord", process)
        assert "missed=true" in failed
        (fired,) = await receiver.wait_alerts(1, timeout=HANG_GUARD)
        await telegram_api.wait_sent(1, where=lambda m: m.chat_id == OPS_CHAT, timeout=HANG_GUARD)

        emulator.gateway.deaf = False
        emulator.gateway.release()  # the new connection comes up: what the deaf one missed is read back
        for message in missed:
            await eventually(lambda m=message: replies_to(emulator, m), "a caught-up message to be answered",
                             timeout=HANG_GUARD, process=process)  # fmt: skip
        (catchup, *_) = await eventually(lambda: catch_ups(home, "discord"), "the catch-up to be logged", process=process)
        assert catchup["new"] == "2" and int(catchup["found"]) >= 2 and catchup["old"] == "0", catchup
        await receiver.wait_alerts(2, timeout=HANG_GUARD)
        await telegram_api.wait_sent(2, where=lambda m: m.chat_id == OPS_CHAT, timeout=HANG_GUARD)
        assert health(url)["adapters"]["discord"]["state"] == "running"
    finally:
        assert await terminate(process, limit=HANG_GUARD) == 0

    # Each of Alice's messages reached the model once and got one reply, nothing twice.
    for message in [first, *missed]:
        assert asked(model_server, message["content"]) == 1, message["content"]
        assert len(replies_to(emulator, message)) == 1, message["content"]
    assert len(emulator.world.sent) == 3
    catchups = catch_ups(home, "discord")
    assert sum(int(line["new"]) for line in catchups) == 2, catchups
    # One alert and one recovery, to the chat and to the webhook.
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], fired["platform"]) == ("adapter_down", "fired", "discord")
    assert (cleared["condition"], cleared["state"], cleared["id"]) == ("adapter_down", "cleared",
                                                                       fired["id"].replace(":fired", ":cleared"))  # fmt: skip
    shown = [message.visible for message in telegram_api.sent_to(OPS_CHAT)]
    assert len(shown) == 2 and shown[0].startswith("Switchboard alert (") and "Discord" in shown[0]
    assert shown[1].startswith("Switchboard recovered (") and "Discord" in shown[1]
    # No alert holds what Alice wrote or a secret.
    texts = [*shown, *(post.body for post in receiver.attempts)]
    for secret in (emulator.token, telegram_api.token, HOOK_TOKEN, "hook-secret", "T0KEN-in-the-path"):
        assert not any(secret in text for text in texts), secret
    for message in [first, *missed]:
        assert not any(message["content"] in text for text in texts), message["content"]
