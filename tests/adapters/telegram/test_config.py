"""Telegram settings that cannot work are refused before the gateway starts, with what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config import load_config
from config.plan import RunPlan, build_plan
from tests.fakes.model_server import ModelServer
from tests.gateway.conftest import write_config


def plan_for(tmp_path: Path, model_server: ModelServer, telegram: dict[str, Any]) -> RunPlan:
    home = tmp_path / "home"
    path = write_config(home, model_server, {"platforms": {"telegram": {"token": "123:abc", **telegram}}})
    return build_plan(load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True))


def test_webhook_mode_without_a_secret_cannot_start(tmp_path: Path, model_server: ModelServer) -> None:
    plan = plan_for(tmp_path, model_server, {"mode": "webhook", "webhook_url": "https://bot.example.org/hook"})
    assert not plan.ready
    assert any("platforms.telegram.webhook_secret" in blocker for blocker in plan.blockers)


def test_a_stall_timeout_shorter_than_the_poll_cannot_start(tmp_path: Path, model_server: ModelServer) -> None:
    plan = plan_for(tmp_path, model_server, {"poll_timeout": 30, "stall_timeout": 20})
    assert not plan.ready
    assert any("stall_timeout (20 s) must be longer than poll_timeout (30 s)" in b for b in plan.blockers)


def test_polling_with_sensible_timeouts_is_planned(tmp_path: Path, model_server: ModelServer) -> None:
    plan = plan_for(tmp_path, model_server, {"poll_timeout": 30, "stall_timeout": 120})
    assert plan.ready and plan.enabled == ["telegram"]
