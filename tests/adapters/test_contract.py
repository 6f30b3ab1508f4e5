"""The adapter contract as each real adapter fills it in: found by name, its hint, its limits (their only
source), its access keys, and the shared way platform exceptions become delivery errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from adapters.contract import (
    AccessPolicy,
    Attempt,
    DeliveryError,
    Markup,
    RateLimited,
    TransientDeliveryError,
    translated,
)
from config.models import PLATFORMS, DiscordConfig, PlatformsConfig, SlackConfig, TelegramConfig
from gateway.adapter_loader import adapter_class
from tests.gateway.processes import REPO
from tests.gateway.test_formatting_checks import LIMITS


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_configured_platform_has_an_adapter_that_declares_the_whole_contract(platform: str) -> None:
    adapter = adapter_class(platform)
    section = PlatformsConfig.model_fields[platform].annotation
    assert adapter.platform == platform and adapter.platform_hint
    assert adapter.chats_setting in section.model_fields  # type: ignore[union-attr]
    assert adapter.servers_setting is None or adapter.servers_setting in section.model_fields  # type: ignore[union-attr]
    assert "from_config" in vars(adapter)


@pytest.mark.parametrize(
    ("platform", "facts"),
    [
        ("telegram", ["4,096", "HTML", "spoilers", "Tables do not"]),
        ("discord", ["2,000", "Markdown", "Tables do not"]),
        ("slack", ["mrkdwn", "3,000-4,000"]),
    ],
)
def test_each_platform_hint_states_formatting_and_limits(platform: str, facts: list[str]) -> None:
    hint = adapter_class(platform).platform_hint
    assert all(fact in hint for fact in facts)


@pytest.mark.parametrize(
    ("platform", "limit"),
    [("telegram", (4096, "utf16", Markup.TELEGRAM_HTML)), ("discord", (2000, "chars", Markup.DISCORD_MARKDOWN)),
     ("slack", (3900, "chars", Markup.SLACK_MRKDWN))],
)  # fmt: skip
def test_the_adapters_capabilities_are_the_limits_the_formatting_tests_use(
    platform: str, limit: tuple[int, str, Markup]
) -> None:
    caps = adapter_class(platform).capabilities
    assert (caps.max_message_length, caps.length_unit, caps.markup) == limit
    assert LIMITS[caps.markup] == (caps.max_message_length, caps.length_unit)


def test_each_adapter_reads_its_own_access_keys() -> None:
    common = {"allowed_users": [1], "allow_all": False, "require_mention": False}
    telegram = adapter_class("telegram").access_policy(TelegramConfig(**common, allowed_chats=[-100]))
    discord = adapter_class("discord").access_policy(DiscordConfig(**common, allowed_channels=[7], allowed_guilds=[9]))
    slack = adapter_class("slack").access_policy(SlackConfig(**common, allowed_channels=["C1"], allowed_teams=["T2"]))
    base = AccessPolicy(allowed_users=frozenset({"1"}), require_mention=False)
    assert telegram == AccessPolicy(**{**_fields(base), "allowed_chats": frozenset({"-100"})})
    assert discord == AccessPolicy(**{**_fields(base), "allowed_chats": frozenset({"7"}), "allowed_servers": frozenset({"9"})})
    assert slack == AccessPolicy(**{**_fields(base), "allowed_chats": frozenset({"C1"})})


def _fields(policy: AccessPolicy) -> dict[str, object]:
    return {name: getattr(policy, name) for name in policy.__slots__}  # type: ignore[attr-defined]


def test_translated_raises_the_delivery_error_chained_and_lets_anything_else_through() -> None:
    def translate(error: Exception, attempt: Attempt) -> DeliveryError | None:
        if isinstance(error, ConnectionResetError):
            return TransientDeliveryError(f"{attempt.action} to {attempt.chat_id}: {error}")
        return RateLimited(3.0) if isinstance(error, LookupError) else None

    with pytest.raises(TransientDeliveryError, match="send to c1: reset") as caught:
        with translated(translate, Attempt("send", "c1")):
            raise ConnectionResetError("reset")
    assert isinstance(caught.value.__cause__, ConnectionResetError)
    with pytest.raises(RateLimited):
        with translated(translate, Attempt("send", "c1")):
            raise KeyError("x")
    with pytest.raises(ZeroDivisionError):
        with translated(translate, Attempt("send", "c1")):
            raise ZeroDivisionError


def test_the_doctors_token_checks_load_no_platform_library() -> None:
    probe = (
        "import sys, adapters.telegram.probe, adapters.discord.probe, adapters.slack.probe\n"
        "print(sorted(m for m in ('aiogram', 'discord', 'slack_bolt', 'slack_sdk') if m in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
