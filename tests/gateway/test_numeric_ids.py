"""Ids written as YAML numbers: `allowed_users: [123456789]` is what an operator types after `/whoami`.

Every id list (``allowed_users``, ``allowed_chats``, ``allowed_channels``, ``allowed_guilds``,
``allowed_teams``) takes whole numbers and text alike and keeps text, so a number lets the same
person in as the quoted form. A float or a boolean is a mistake (``1e18``, ``yes``) and still refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config import load_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.builders import Chat, User
from tests.gateway.conftest import spoken
from tests.gateway.processes import REPO, clean_env, switchboard, terminate
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway process, several times: slow on a busy machine

NUMERIC_IDS = """\
platforms:
  telegram:
    allowed_users: [123456789, "987654321"]
    allowed_chats: [-1001234567890]
  discord:
    allowed_users: [123456789012345678]
    allowed_guilds: ["223456789012345678", 323456789012345678]
    allowed_channels: [423456789012345678]
  slack:
    allowed_users: [U012ABCDEF]
    allowed_channels: [C012ABCDEF]
    allowed_teams: [T012ABCDEF]
"""


def test_check_takes_numbers_in_every_id_list_and_keeps_them_as_text(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(NUMERIC_IDS, encoding="utf-8")
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x")
    assert done.returncode == 0, done.stderr
    p = load_config(environ={"SWITCHBOARD_HOME": str(tmp_path)}).settings.platforms
    assert p.telegram.allowed_users == ["123456789", "987654321"]
    assert p.telegram.allowed_chats == ["-1001234567890"]
    assert p.discord.allowed_users == ["123456789012345678"]  # 18 digits, exactly
    assert p.discord.allowed_guilds == ["223456789012345678", "323456789012345678"]
    assert p.discord.allowed_channels == ["423456789012345678"]
    assert p.slack.allowed_teams == ["T012ABCDEF"]


def test_a_float_or_a_boolean_is_still_refused_with_what_to_write(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "platforms:\n  discord:\n    allowed_users: [1.5e+17]\n    allowed_channels: [yes]\n", encoding="utf-8"
    )
    done = switchboard("check", home=tmp_path)
    assert done.returncode == 2
    problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - platforms.discord.allowed_users.0: must be an id, written as a whole number or as text, got 1.5e+17",
        "  - platforms.discord.allowed_channels.0: must be an id, written as a whole number or as text, got true",
    ]


async def test_a_user_and_a_group_allowed_by_number_are_answered(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    """Through the real gateway process and aiogram: the numbers match the ids Telegram sends."""
    model_server.responder = lambda record: Text("re: " + spoken(record.last_user_text))
    api = telegram_api
    alice, stranger = User(id=123456789, first_name="Alice"), User(id=555, first_name="Stranger")
    group = Chat(id=-1001234567890, type="supergroup", title="Team")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  api_key: test\n  base_url: {model_server.base_url}\nhealth:\n  port: 0\nlogging:\n  console: false\n"
        f"sessions:\n  debounce_ms: 0\nplatforms:\n  telegram:\n    token: \"{api.token}\"\n"
        f"    api_base_url: {api.base_url}\n    poll_timeout: 1\n    require_mention: false\n"
        "    allowed_users: [123456789]\n    allowed_chats: [-1001234567890]\n",
        encoding="utf-8",
    )
    process = subprocess.Popen([sys.executable, "-m", "gateway.operations.cli", "run"], cwd=REPO, env=clean_env(home),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        log = home / "logs" / "gateway.log"
        await eventually(lambda: log.exists() and "gateway.started" in log.read_text("utf-8"), "start", process=process, timeout=120)
        await api.say(stranger, "let me in", chat=group)
        await api.say(alice, "hello from the group", chat=group)
        await api.say(alice, "hello in private")
        await eventually(lambda: len(api.sent) >= 2, "two replies", process=process, timeout=120)
        await eventually(lambda: not api.updates, "every update to be confirmed", process=process, timeout=120)
    finally:
        code = await terminate(process, limit=120)
    assert code == 0
    assert sorted((m.chat_id, m.visible) for m in api.sent) == [
        (group.id, "re: hello from the group"), (alice.id, "re: hello in private"),
    ]  # fmt: skip
