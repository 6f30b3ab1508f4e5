"""The package's surface: the names the gateway uses, listed, and no model SDK loaded until a provider is made."""

from __future__ import annotations

import json
import subprocess
import sys

import agent

SDKS = ("anthropic", "openai")
NOT_OURS_TO_LOAD = ("aiogram", "discord", "slack_bolt", "slack_sdk", "aiosqlite", "storage", "gateway", "adapters", "config")


def _loaded_after(code: str) -> list[str]:
    """The top-level packages among SDKS and NOT_OURS_TO_LOAD that a fresh interpreter holds after ``code``."""
    watched = SDKS + NOT_OURS_TO_LOAD
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(watched)!r})))"
    done = subprocess.run([sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_public_names_are_listed_and_exist() -> None:
    assert agent.__all__ == sorted(agent.__all__)
    assert all(hasattr(agent, name) for name in agent.__all__)
    assert {"Agent", "AgentSettings", "ChatMessage", "ModelRouter", "make_provider"} <= set(agent.__all__)


def test_importing_the_agent_loads_no_sdk_platform_or_other_package_of_ours() -> None:
    assert _loaded_after("import agent") == []


def test_make_provider_loads_only_the_sdk_it_is_asked_for() -> None:
    made = "from agent import make_provider\nprovider = make_provider('{}', api_key='k', base_url=None, timeout=5.0)"

    assert _loaded_after(made.format("openai")) == ["openai"]
    assert _loaded_after(made.format("anthropic")) == ["anthropic"]
