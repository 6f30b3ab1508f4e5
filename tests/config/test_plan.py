"""What `run` would start and what stops it: the messages name exactly what to set."""

from __future__ import annotations

from pathlib import Path

from config import load_config
from config.plan import build_plan


def plan_for(tmp_path: Path, yaml_text: str = "", **env: str):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml_text, encoding="utf-8")
    return build_plan(load_config(cfg, {"SWITCHBOARD_HOME": str(tmp_path), **env}))


def test_nothing_configured_names_every_variable(tmp_path: Path) -> None:
    plan = plan_for(tmp_path)
    assert not plan.ready
    platform_line, model_line = plan.blockers
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", str(tmp_path / ".env")):
        assert name in platform_line
    assert "ANTHROPIC_API_KEY" in model_line and "model.api_key" in model_line


def test_a_token_enables_its_platform(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="k")
    assert plan.ready
    assert plan.enabled == ["telegram"]


def test_enabled_false_wins_over_credentials(tmp_path: Path) -> None:
    plan = plan_for(
        tmp_path,
        "platforms:\n  telegram:\n    enabled: false\n",
        TELEGRAM_BOT_TOKEN="1:x",
        DISCORD_BOT_TOKEN="d",
        ANTHROPIC_API_KEY="k",
    )
    assert plan.enabled == ["discord"]
    telegram = plan.platforms[0]
    assert not telegram.enabled and "disabled" in telegram.detail


def test_enabled_true_without_token_is_a_blocker(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, "platforms:\n  discord:\n    enabled: true\n", ANTHROPIC_API_KEY="k")
    assert any(b.startswith("discord is enabled: set DISCORD_BOT_TOKEN") for b in plan.blockers)


def test_slack_socket_mode_needs_both_tokens(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, SLACK_BOT_TOKEN="xoxb-1", ANTHROPIC_API_KEY="k")
    assert plan.blockers == (
        "slack has only part of its credentials: set SLACK_APP_TOKEN or platforms.slack.app_token (SLACK_APP_TOKEN "
        f"is not set in the environment and there is no {tmp_path / '.env'}; platforms.slack.app_token is not in "
        f"{tmp_path / 'config.yaml'})",
    )


def test_slack_http_mode_needs_signing_secret_not_app_token(tmp_path: Path) -> None:
    plan = plan_for(
        tmp_path, "platforms:\n  slack:\n    mode: http\n", SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s", ANTHROPIC_API_KEY="k"
    )
    assert plan.ready and plan.enabled == ["slack"]


def test_telegram_webhook_mode_needs_url_and_secret(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, "platforms:\n  telegram:\n    mode: webhook\n", TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="k")
    (blocker,) = plan.blockers
    assert "platforms.telegram.webhook_url" in blocker and "platforms.telegram.webhook_secret" in blocker


def test_local_openai_compatible_server_needs_no_key(tmp_path: Path) -> None:
    text = "model:\n  provider: openai\n  name: llama3\n  base_url: http://127.0.0.1:11434/v1\n"
    assert plan_for(tmp_path, text, TELEGRAM_BOT_TOKEN="1:x").ready


def test_openai_key_variable_is_named_for_openai(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, "model:\n  provider: openai\n  name: gpt-5\n", TELEGRAM_BOT_TOKEN="1:x")
    (blocker,) = plan.blockers
    assert "OPENAI_API_KEY" in blocker and "ANTHROPIC" not in blocker
