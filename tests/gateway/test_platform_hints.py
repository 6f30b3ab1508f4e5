"""Which hint a new session's prompt ends with: ``agent.platform_hints`` from config, else the adapter's own."""

from __future__ import annotations

from gateway.turn.platform_hints import PlatformHints
from tests.fakes.adapter import LoopbackAdapter


class HintedAdapter(LoopbackAdapter):
    platform = "discord"
    platform_hint = "Built-in Discord hint."


def test_configured_hints_override_the_adapters_own() -> None:
    adapters = {"discord": HintedAdapter()}
    assert PlatformHints(adapters)("discord") == "Built-in Discord hint."
    assert PlatformHints(adapters, {"discord": "Custom."})("Discord") == "Custom."
    assert PlatformHints(adapters, {" Discord ": " Custom. "})("discord") == "Custom."
    assert PlatformHints(adapters, {"discord": ""})("discord") == ""
    assert PlatformHints(adapters, {"matrix": "Matrix text."})("matrix") == "Matrix text."
    assert PlatformHints(adapters)("matrix") == ""
    assert PlatformHints(adapters)(None) == ""
