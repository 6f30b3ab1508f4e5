"""``switchboard doctor`` as an operator runs it: a real subprocess, real HTTP to local stand-ins.

The platform calls go to small aiohttp stubs (tests/gateway/platform_stubs.py)
and the model call to the fake model server, both on 127.0.0.1, through each
service's api_base_url / base_url in config.yaml.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from agent.memory import MemoryTarget
from agent.memory_scopes import MemoryBank, MemoryScope
from config.home import ensure_home
from config.loader import example_config_text
from storage import NewMessage, Store
from tests.fakes.model_server import ModelServer
from tests.gateway.platform_stubs import (
    DISCORD_TOKEN,
    SLACK_APP_TOKEN,
    SLACK_BOT_TOKEN,
    TELEGRAM_TOKEN,
    PlatformStubs,
    platform_stubs,
)
from tests.gateway.processes import REPO, clean_env

MODEL_KEY = "sk-ant-doctor-test-key-0123456789"
GOOD_SECRETS = {
    "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
    "DISCORD_BOT_TOKEN": DISCORD_TOKEN,
    "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
    "SLACK_APP_TOKEN": SLACK_APP_TOKEN,
    "ANTHROPIC_API_KEY": MODEL_KEY,
}
CHECKS = ("config", "home", "database", "disk", "telegram", "discord", "slack", "model", "voice")


@dataclass
class Doctor:
    home: Path
    stubs: PlatformStubs
    model: ModelServer

    def configure(
        self,
        *,
        model_url: str | None = None,
        message_content_intent: bool = True,
        transcription: dict[str, Any] | None = None,
    ) -> None:
        config: dict[str, Any] = {
            "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "base_url": model_url or self.model.base_url},
            "platforms": {
                "telegram": {"api_base_url": self.stubs.telegram},
                "discord": {"api_base_url": self.stubs.discord, "message_content_intent": message_content_intent},
                "slack": {"api_base_url": self.stubs.slack},
            },
            "health": {"port": 0},
        }
        if transcription is not None:
            config["media"] = {"transcription": transcription}
        (self.home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")

    async def run(self, *args: str, **secrets: str) -> tuple[int, dict[str, str], str]:
        """Exit status, each check's line by name, and everything printed."""
        env = clean_env(self.home, **{**GOOD_SECRETS, **secrets})
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.operations.cli", "doctor", *args, cwd=REPO, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        text = out.decode() + err.decode()
        lines = {}
        for line in out.decode().splitlines():
            parts = line.split(maxsplit=2)
            if len(parts) >= 2 and parts[0] in {"ok", "FAIL", "skip"}:
                lines[parts[1]] = line
        assert process.returncode is not None
        return process.returncode, lines, text


@pytest_asyncio.fixture
async def doctor(model_server: ModelServer, tmp_path: Path) -> AsyncIterator[Doctor]:
    model_server.api_key = MODEL_KEY
    home = tmp_path / "home"
    ensure_home(home, config_template=example_config_text())
    store = await Store.open(home / "state.db")
    session = await store.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    await store.append_messages(session.id, [NewMessage("user", "hello " * 200) for _ in range(50)])
    await store.close()
    async with platform_stubs() as stubs:
        running = Doctor(home, stubs, model_server)
        running.configure()
        yield running


def assert_no_secret(text: str) -> None:
    for secret in GOOD_SECRETS.values():
        assert secret not in text


async def test_everything_good_exits_0_with_every_line_ok(doctor: Doctor) -> None:
    doctor.configure(transcription={"base_url": f"{doctor.model.base_url}/v1"})
    status, lines, text = await doctor.run()
    assert status == 0, text
    assert list(lines) == list(CHECKS)
    assert all(line.startswith("ok  ") for line in lines.values()), text
    assert "@doctor_test_bot" in lines["telegram"]
    assert "Message Content intent on" in lines["discord"]
    assert "doctor in Doctors" in lines["slack"]
    assert "one-token request" in lines["model"]
    assert "lists the model" in lines["voice"]
    (call,) = doctor.model.requests
    assert call.body["max_tokens"] == 1
    assert_no_secret(text)


@pytest.mark.parametrize(
    ("variable", "bad", "check", "expected"),
    [
        ("TELEGRAM_BOT_TOKEN", "123456789:AAwrong-token-from-somewhere-else", "telegram",
         "Telegram rejected the token (401 Unauthorized). Fix: copy the token again from @BotFather"),
        ("DISCORD_BOT_TOKEN", "wrong-discord-token.abc.def", "discord",
         "Discord rejected the token (401 Unauthorized). Fix: Developer Portal > your application > Bot > Reset Token"),
        ("SLACK_BOT_TOKEN", "xoxb-wrong-slack-token", "slack",
         "Slack rejected the bot token (invalid_auth). Fix: OAuth & Permissions > Bot User OAuth Token"),
        ("ANTHROPIC_API_KEY", "sk-ant-wrong-key-0123456789", "model",
         "auth (401)"),
    ],
)  # fmt: skip
async def test_a_rejected_token_fails_its_line_and_says_where_to_put_a_new_one(
    doctor: Doctor, variable: str, bad: str, check: str, expected: str
) -> None:
    status, lines, text = await doctor.run(**{variable: bad})
    assert status == 1
    assert lines[check].startswith(f"FAIL  {check}")
    assert expected in lines[check]
    assert variable in lines[check], "the fix names the variable the token comes from"
    assert [name for name, line in lines.items() if line.startswith("FAIL")] == [check]
    assert bad not in text
    assert_no_secret(text)


async def test_discord_without_the_message_content_intent_explains_4014(doctor: Doctor) -> None:
    doctor.stubs.discord_flags = 0
    status, lines, _ = await doctor.run()
    assert status == 1
    assert "4014" in lines["discord"] and "Message Content Intent" in lines["discord"]


async def test_a_home_others_can_read_fails_with_the_chmod_to_run(doctor: Doctor) -> None:
    os.chmod(doctor.home, 0o755)
    os.chmod(doctor.home / ".env", 0o644)
    status, lines, _ = await doctor.run("--offline")
    assert status == 1
    assert lines["home"].startswith("FAIL  home")
    assert f"{doctor.home}/ (0755)" in lines["home"] and ".env (0644)" in lines["home"]
    assert f"Fix: chmod 700 {doctor.home} && chmod -R go-rwx {doctor.home}" in lines["home"]


async def test_a_readable_file_in_a_persons_memory_folder_fails_the_home_check(doctor: Doctor) -> None:
    store = MemoryBank(doctor.home / "memories").store(MemoryScope.person("telegram", "42"))
    assert store.add(MemoryTarget.USER, "Name: Ada").ok  # makes users/, users/telegram/ and users/telegram/42/
    os.chmod(store.path(MemoryTarget.USER), 0o644)
    status, lines, _ = await doctor.run("--offline")
    assert status == 1
    assert "group or others can access memories/users/telegram/42/USER.md (0644)." in lines["home"]


async def test_a_damaged_database_fails_with_restore_advice(doctor: Doctor) -> None:
    db = doctor.home / "state.db"
    with db.open("r+b") as handle:
        handle.seek(db.stat().st_size // 2)
        handle.write(b"\xa5" * 4096 * 4)
    status, lines, _ = await doctor.run("--offline")
    assert status == 1
    assert lines["database"].startswith(f"FAIL  database  {db} is damaged")
    assert "switchboard restore" in lines["database"]


async def test_a_database_from_a_newer_build_fails(doctor: Doctor) -> None:
    with sqlite3.connect(doctor.home / "state.db") as conn:
        conn.execute("UPDATE schema_version SET version = version + 1")
    status, lines, _ = await doctor.run("--offline")
    assert status == 1
    assert "written by a newer Switchboard" in lines["database"]


async def test_a_model_endpoint_that_is_down_fails_the_model_line(doctor: Doctor) -> None:
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    doctor.configure(model_url=closed)
    status, lines, _ = await doctor.run()
    assert status == 1
    assert lines["model"].startswith("FAIL  model")
    assert f"at {closed}: connection" in lines["model"]
    assert "Fix: check the network, any proxy, and model.base_url" in lines["model"]


async def test_offline_skips_the_network_and_passes(doctor: Doctor) -> None:
    status, lines, text = await doctor.run("--offline")
    assert status == 0, text
    assert [name for name, line in lines.items() if line.startswith("skip")] == [
        "telegram", "discord", "slack", "model", "voice"
    ]  # fmt: skip
    assert doctor.model.requests == []


async def test_a_broken_config_fails_and_skips_the_rest(doctor: Doctor) -> None:
    (doctor.home / "config.yaml").write_text("compression:\n  threshold: 1.5\n", encoding="utf-8")
    status, lines, _ = await doctor.run()
    assert status == 1
    assert "compression.threshold: must be between 0 and 1, got 1.5" in lines["config"]
    assert all(lines[name].startswith("skip") for name in CHECKS[1:])


VOICE_KEY = "sk-voice-doctor-key-0123456789"


def closed_port_url() -> str:
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


async def test_without_transcription_the_voice_line_says_voice_notes_are_not_supported(doctor: Doctor) -> None:
    status, lines, text = await doctor.run()
    assert status == 0, text
    assert lines["voice"].startswith("skip  voice     media.transcription is not set")
    assert doctor.model.transcription.model_list_calls == 0


async def test_a_transcription_endpoint_that_takes_the_key_is_ok_and_gets_no_audio(doctor: Doctor) -> None:
    doctor.model.transcription.api_key = VOICE_KEY
    doctor.configure(transcription={"base_url": f"{doctor.model.base_url}/v1", "model": "whisper-1"})
    status, lines, text = await doctor.run(OPENAI_API_KEY=VOICE_KEY)
    assert status == 0, text
    port = doctor.model.port
    assert lines["voice"] == (
        f"ok    voice     whisper-1 at 127.0.0.1:{port} answers and lists the model (asked for its model list; "
        "no audio was sent)"
    )
    assert doctor.model.transcription.model_list_calls == 1 and doctor.model.transcription.requests == []
    assert VOICE_KEY not in text


async def test_a_model_the_endpoint_does_not_list_is_named(doctor: Doctor) -> None:
    doctor.configure(transcription={"base_url": f"{doctor.model.base_url}/v1", "model": "Systran/faster-whisper-small"})
    status, lines, _ = await doctor.run()
    assert status == 0
    assert "answers, but lists 2 other models and not this one" in lines["voice"]
    assert "check media.transcription.model" in lines["voice"]


async def test_a_refused_transcription_key_fails_the_voice_line(doctor: Doctor) -> None:
    doctor.model.transcription.api_key = VOICE_KEY
    wrong = "sk-wrong-voice-key-0123456789"
    doctor.configure(transcription={"base_url": f"{doctor.model.base_url}/v1", "api_key": wrong})
    status, lines, text = await doctor.run()
    assert status == 1
    assert lines["voice"].startswith("FAIL  voice")
    assert "refused the key (401). Fix: set a valid key in media.transcription.api_key" in lines["voice"]
    assert "sk-wrong-voice-key" not in text


async def test_a_transcription_server_that_is_down_fails_the_voice_line(doctor: Doctor) -> None:
    closed = closed_port_url()
    doctor.configure(transcription={"base_url": f"{closed}/v1"})
    status, lines, _ = await doctor.run()
    assert status == 1
    where = closed.removeprefix("http://")
    assert f"whisper-1 at {where}: could not connect. Fix: start the transcription server" in lines["voice"]


async def test_openai_without_any_key_fails_before_asking(doctor: Doctor) -> None:
    doctor.configure(transcription={"model": "whisper-1"})
    status, lines, _ = await doctor.run()
    assert status == 1
    assert lines["voice"].startswith("FAIL  voice     whisper-1 at api.openai.com: no key (OPENAI_API_KEY is ")
    assert "Fix: set OPENAI_API_KEY in" in lines["voice"]
