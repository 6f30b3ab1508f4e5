"""Session keys, command parsing and access decisions."""

from __future__ import annotations

import dataclasses

import pytest

from adapters.contract import AccessPolicy, ChatType, InboundMessage
from agent.memory_scopes import MemoryScope
from gateway.inbound.access import AccessControl, Verdict
from gateway.commands.parsing import parse_command
from gateway.turn.memory_scope import scope_for_key, scope_for_record
from gateway.inbound.session_key import session_key_for
from storage import SessionRecord


def message(**fields: object) -> InboundMessage:
    values: dict[str, object] = {
        "platform": "telegram", "event_id": "1", "chat_id": "100", "chat_type": ChatType.DM, "user_id": "7", "text": "hi"
    }
    values.update(fields)
    return InboundMessage(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "per_user", "expected"),
    [
        ({}, True, "telegram:dm:100"),
        ({"chat_type": ChatType.GROUP}, True, "telegram:group:100:user:7"),
        ({"chat_type": ChatType.GROUP}, False, "telegram:group:100"),
        ({"chat_type": ChatType.GROUP, "thread_id": "5"}, True, "telegram:group:100:thread:5"),
        ({"platform": "slack", "chat_type": ChatType.CHANNEL, "chat_id": "C1", "thread_id": "1700.1"}, True, "slack:channel:C1:thread:1700.1"),
        ({"platform": "discord", "chat_type": ChatType.DM, "chat_id": "d9"}, True, "discord:dm:d9"),
    ],
)
def test_session_keys(fields: dict[str, object], per_user: bool, expected: str) -> None:
    assert str(session_key_for(message(**fields), group_per_user=per_user)) == expected


@pytest.mark.parametrize(
    ("fields", "per_user", "folder"),
    [
        ({}, True, "users/telegram/7"),
        ({"chat_type": ChatType.GROUP}, True, "users/telegram/7"),
        ({"chat_type": ChatType.GROUP}, False, "chats/telegram/100"),
        ({"chat_type": ChatType.GROUP, "thread_id": "5"}, True, "threads/telegram/100/5"),
        ({"platform": "slack", "chat_id": "D1", "thread_id": "1700.1"}, True, "users/slack/7"),
        ({"platform": "discord", "chat_type": ChatType.DM, "chat_id": "d9", "user_id": "../../x"}, True,
         "users/discord/%2E.%2F..%2Fx"),
    ],
)  # fmt: skip
def test_whose_memory_a_session_uses(fields: dict[str, object], per_user: bool, folder: str) -> None:
    key = session_key_for(message(**fields), group_per_user=per_user)
    assert scope_for_key(key).folder.as_posix() == folder


def test_a_dm_stored_without_its_user_has_no_memory_scope() -> None:
    record = SessionRecord(
        id="s", session_key="telegram:dm:100", platform="telegram", chat_id="100", chat_type="dm", thread_id=None,
        user_id=None, title=None, model=None, system_prompt=None, parent_session_id=None, started_at=0.0,
        ended_at=None, end_reason=None, message_count=0, input_tokens=0, output_tokens=0, cache_read_tokens=0,
        cache_write_tokens=0, last_prompt_tokens=0, cost_usd=0.0,
    )  # fmt: skip
    assert scope_for_record(record) is None
    assert scope_for_record(dataclasses.replace(record, user_id="7")) == MemoryScope.person("telegram", "7")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/help", ("help", "")),
        ("/new@SwitchBot my title", ("new", "my title")),
        ("/RESET", ("new", "")),
        ("/start", ("help", "")),
        ("/compress the database migration", ("compress", "the database migration")),
        ("  /stop  ", ("stop", "")),
        ("/usr/bin/ls", None),
        ("/help@OtherBot", None),
        ("/unknowncommand", None),
        ("please /stop", None),
        ("/", None),
    ],
)
def test_command_parsing(text: str, expected: tuple[str, str] | None) -> None:
    command = parse_command(text, bot_username="SwitchBot")
    assert (None if command is None else (command.name, command.args)) == expected


def test_access_defaults_deny_and_offer_pairing_in_dm() -> None:
    access = AccessControl()
    msg = message()
    assert access.where(msg).allowed
    assert access.who(msg, approved=False).verdict is Verdict.PAIR
    assert access.who(message(chat_type=ChatType.GROUP, mentioned=True), approved=False).verdict is Verdict.IGNORE
    assert access.who(msg, approved=True).allowed


def test_allowlist_and_allow_all() -> None:
    access = AccessControl({"telegram": AccessPolicy(allowed_users=frozenset({"7"})), "slack": AccessPolicy(allow_all=True)})
    assert access.who(message(), approved=False).reason == "user is in allowed_users"
    assert access.who(message(user_id="8"), approved=False).verdict is Verdict.PAIR
    assert access.who(message(platform="slack", user_id="U1"), approved=False).allowed


def test_groups_need_a_mention_and_an_allowed_chat() -> None:
    access = AccessControl({"telegram": AccessPolicy(allowed_chats=frozenset({"100"}))})
    group = {"chat_type": ChatType.GROUP}
    assert access.where(message(**group)).reason == "group message without a mention or reply to the bot"
    assert access.where(message(**group, mentioned=True)).allowed
    assert not access.where(message(**group, mentioned=True, chat_id="200")).allowed
    relaxed = AccessControl({"telegram": AccessPolicy(require_mention=False)})
    assert relaxed.where(message(**group)).allowed


def test_bots_and_servers() -> None:
    access = AccessControl({"discord": AccessPolicy(allowed_servers=frozenset({"g1"}))})
    assert access.where(message(from_bot=True)).reason == "message from a bot"
    other = message(platform="discord", chat_type=ChatType.GROUP, mentioned=True, server_id="g2")
    assert access.where(other).verdict is Verdict.IGNORE
    assert access.where(message(platform="discord", chat_type=ChatType.GROUP, mentioned=True, server_id="g1")).allowed
