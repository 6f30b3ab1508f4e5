"""Which settings are secrets, which variable each is read from when left unset, and which are only masked:
the loader's answers for every platform, pinned whole (the platforms' config models declare them)."""

from __future__ import annotations

from pathlib import Path

from config import LoadedConfig, load_config
from config.inline_secrets import mask_inline_secrets
from config.loader import conventional_variable, environment_secrets

VALUES = {
    "TELEGRAM_BOT_TOKEN": "telegram-token",
    "TELEGRAM_WEBHOOK_SECRET": "telegram-webhook",
    "DISCORD_BOT_TOKEN": "discord-token",
    "SLACK_BOT_TOKEN": "xoxb-slack-bot",
    "SLACK_APP_TOKEN": "xapp-slack-app",
    "SLACK_SIGNING_SECRET": "slack-signing",
    "ANTHROPIC_API_KEY": "sk-ant-key",
    "OPENAI_API_KEY": "sk-openai-key",
}
PLATFORM_SECRETS = {
    "platforms.telegram.token": "TELEGRAM_BOT_TOKEN",
    "platforms.telegram.webhook_secret": "TELEGRAM_WEBHOOK_SECRET",
    "platforms.discord.token": "DISCORD_BOT_TOKEN",
    "platforms.slack.bot_token": "SLACK_BOT_TOKEN",
    "platforms.slack.app_token": "SLACK_APP_TOKEN",
    "platforms.slack.signing_secret": "SLACK_SIGNING_SECRET",
}


def load_written(tmp_path: Path, text: str, environ: dict[str, str]) -> LoadedConfig:
    """``text`` as the home's config.yaml, loaded with ``environ``."""
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    return load_config(config, {"SWITCHBOARD_HOME": str(tmp_path), **environ})


def test_unset_platform_secrets_are_read_from_their_variables_but_the_webhook_secret_only_by_reference(
    tmp_path: Path,
) -> None:
    loaded = load_config(environ={"SWITCHBOARD_HOME": str(tmp_path), **VALUES})
    platforms = loaded.settings.platforms
    assert (platforms.telegram.token, platforms.telegram.webhook_secret, platforms.discord.token) == (
        "telegram-token", None, "discord-token"
    )  # fmt: skip
    assert (platforms.slack.bot_token, platforms.slack.app_token, platforms.slack.signing_secret) == (
        "xoxb-slack-bot", "xapp-slack-app", "slack-signing"
    )  # fmt: skip
    assert loaded.variables == {
        **{path: [name] for path, name in PLATFORM_SECRETS.items() if name != "TELEGRAM_WEBHOOK_SECRET"},
        "model.api_key": ["ANTHROPIC_API_KEY"],
        "storage.password": ["PGPASSWORD"],
    }


def test_the_environment_wins_over_dotenv_which_fills_what_the_environment_has_empty(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SLACK_APP_TOKEN=xapp-from-dotenv\nDISCORD_BOT_TOKEN=from-dotenv\n", encoding="utf-8")
    env = {"SWITCHBOARD_HOME": str(tmp_path), "SLACK_APP_TOKEN": "", "DISCORD_BOT_TOKEN": "from-environment"}
    platforms = load_config(environ=env).settings.platforms
    assert (platforms.slack.app_token, platforms.discord.token) == ("xapp-from-dotenv", "from-environment")


def test_a_value_in_the_config_file_wins_over_the_variable(tmp_path: Path) -> None:
    loaded = load_written(tmp_path, "platforms:\n  slack:\n    signing_secret: written-inline\n", VALUES)
    assert loaded.settings.platforms.slack.signing_secret == "written-inline"
    assert "platforms.slack.signing_secret" not in loaded.variables


def test_every_secret_is_known_with_its_conventional_variable(tmp_path: Path) -> None:
    text = ("model:\n  fallbacks:\n    - {provider: openai, name: gpt-5}\n"
            "platforms:\n  telegram:\n    webhook_secret: ${TELEGRAM_WEBHOOK_SECRET}\n")  # fmt: skip
    loaded = load_written(tmp_path, text, VALUES)
    paths = ["model.api_key", "auxiliary.compression.api_key", *PLATFORM_SECRETS, "storage.password",
             "model.fallbacks.0.api_key"]  # fmt: skip
    assert loaded.secret_paths() == paths
    assert [conventional_variable(loaded.settings, path) for path in paths] == [
        "ANTHROPIC_API_KEY", None, *PLATFORM_SECRETS.values(), "PGPASSWORD", "OPENAI_API_KEY"
    ]  # fmt: skip
    assert sorted(loaded.secrets()) == sorted(VALUES.values())


def test_without_a_configuration_the_secrets_in_the_variables_are_still_masked(tmp_path: Path) -> None:
    env = {"SWITCHBOARD_HOME": str(tmp_path), **VALUES, "UNRELATED": "not-a-secret"}
    # as a set: the redactor orders secrets itself (longest first)
    assert sorted(environment_secrets(env)) == sorted(VALUES.values())


def test_inline_platform_secrets_are_masked_by_their_conventional_variables(tmp_path: Path) -> None:
    text = ("platforms:\n  telegram:\n    token: telegram-inline\n    webhook_secret: webhook-inline\n"
            "  slack:\n    signing_secret: signing-inline\n")  # fmt: skip
    masked = mask_inline_secrets(load_written(tmp_path, text, {}), {})
    assert masked.masked == {
        "platforms.telegram.token": "TELEGRAM_BOT_TOKEN",
        "platforms.telegram.webhook_secret": "TELEGRAM_WEBHOOK_SECRET",
        "platforms.slack.signing_secret": "SLACK_SIGNING_SECRET",
    }


def test_a_new_homes_dotenv_lists_every_variable_a_secret_is_read_from(tmp_path: Path) -> None:
    load_config(environ={"SWITCHBOARD_HOME": str(tmp_path)}, create_home=True)
    lines = (tmp_path / ".env").read_text(encoding="utf-8").splitlines()
    assert lines[lines.index("# Platforms (set the ones you use):") + 1:] == [
        "# TELEGRAM_BOT_TOKEN=123456:ABC...",
        "# DISCORD_BOT_TOKEN=...",
        "# SLACK_BOT_TOKEN=xoxb-...",
        "# SLACK_APP_TOKEN=xapp-...",
        "# SLACK_SIGNING_SECRET=...",
        "#",
        "# PostgreSQL (only with a postgresql:// storage.url; the password never goes in the URL):",
        "# PGPASSWORD=...",
    ]
    assert lines[:8] == [
        "# Secrets for Switchboard. Values here fill in variables the environment does not set (or sets empty).",
        "# This file should stay readable by its owner only (0600).",
        "#",
        "# The model (one of these, matching model.provider in config.yaml):",
        "# ANTHROPIC_API_KEY=sk-ant-...",
        "# OPENAI_API_KEY=sk-...",
        "#",
        "# Platforms (set the ones you use):",
    ]


def test_alert_webhook_urls_and_header_values_are_secrets_masked_in_a_backups_config(tmp_path: Path) -> None:
    text = ("alerts:\n  webhooks:\n    - url: https://hooks.example.org/T0/url-secret-1234\n"
            "      headers: {Authorization: 'Bearer hdr-secret-4567', X-Team.Key: team-secret-8901}\n"
            "    - {url: '${SECOND_HOOK}'}\n")  # fmt: skip
    environ = {"SECOND_HOOK": "https://other.example.org/hook-secret-2345"}
    loaded = load_written(tmp_path, text, environ)
    webhook_paths = [path for path in loaded.secret_paths() if path.startswith("alerts.")]
    assert webhook_paths == ["alerts.webhooks.0.url", "alerts.webhooks.0.headers.Authorization",
                             "alerts.webhooks.0.headers.X-Team.Key", "alerts.webhooks.1.url"]  # fmt: skip
    assert {"https://hooks.example.org/T0/url-secret-1234", "Bearer hdr-secret-4567", "team-secret-8901",
            "https://other.example.org/hook-secret-2345"} <= set(loaded.secrets())  # fmt: skip
    masked = mask_inline_secrets(loaded, environ)
    for secret in ("url-secret-1234", "hdr-secret-4567", "team-secret-8901"):
        assert secret not in masked.text
    assert "${SWITCHBOARD_ALERTS_WEBHOOKS_0_URL}" in masked.text and "${SECOND_HOOK}" in masked.text
