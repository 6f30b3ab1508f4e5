"""``switchboard check`` prints, byte for byte, the same plan for every platform and mode: all three platforms
on in polling/socket and in webhook/HTTP mode, and each way a platform can be off or blocked. The whole output
is compared, so a change in how the plan is built (per platform, from its config model) cannot change a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.operations.version import version
from tests.gateway.processes import switchboard

KEY_FROM_ENV = "key from ANTHROPIC_API_KEY"
NO_KEY = "no key (ANTHROPIC_API_KEY is set neither in the environment nor in {home}/.env)"
NO_KEY_NO_DOTENV = "no key (ANTHROPIC_API_KEY is not set in the environment and there is no {home}/.env)"
MODEL_BLOCKER = (
    "  - no API key for the anthropic model 'claude-sonnet-4-6': set ANTHROPIC_API_KEY or model.api_key "
    "(ANTHROPIC_API_KEY is {state}; model.api_key is not in {home}/config.yaml)"
)
READY_ALL = "Ready: `switchboard run` would start telegram, discord, slack."


def screen(key: str, rest: str) -> str:
    """The whole output: the settings every scenario shares, then its platforms and its verdict."""
    return "\n".join([
        f"Switchboard {version()}: configuration is valid",
        "",
        "  config file  {home}/config.yaml",
        "  home         {home}",
        "  database     SQLite, {home}/state.db (synchronous=normal)",
        "  log file     {home}/logs/gateway.log (text, level info, rotated at 10 MB x 5)",
        f"  model        anthropic / claude-sonnet-4-6, {key}, the provider's default endpoint, "
        "context from the built-in model table, cache ttl auto",
        "  compression  agent compacts at 50% of the window, keeping 20% of that as tail (at least 20 messages); "
        "gateway hygiene at 85%",
        "  voice notes  not transcribed (media.transcription is not set: users are told voice notes are not "
        "supported here)",
        "  health       http://127.0.0.1:8642/health",
        "  alerts       nowhere (alerts.chats and alerts.webhooks are empty: problems show in /health, /metrics and the log)",
        "  platforms  ",
        rest,
    ]) + "\n"  # fmt: skip


WEBHOOK_HTTP = """platforms:
  telegram:
    mode: webhook
    webhook_url: https://bot.example.org/telegram
    webhook_secret: ${TELEGRAM_WEBHOOK_SECRET}
    webhook_listen: {host: 0.0.0.0, port: 8444}
    api_base_url: http://127.0.0.1:8081
  discord:
    message_content_intent: true
    api_base_url: http://127.0.0.1:8082/api
  slack:
    mode: http
    http_listen: {port: 3001, path: /events}
    api_base_url: http://127.0.0.1:8083/api/
"""

BLOCKED = """platforms:
  telegram:
    enabled: true
    mode: webhook
  discord:
    enabled: false
    gateway_url: ws://127.0.0.1:8084
  slack:
    mode: http
"""

STALLED = """model:
  api_key: ${MY_KEY}
platforms:
  telegram:
    poll_timeout: 30
    stall_timeout: 20
  discord:
    enabled: true
  slack:
    enabled: true
    bot_token: ${MY_SLACK}
"""

NOTHING_IN_WEBHOOK_AND_HTTP = """platforms:
  telegram:
    mode: webhook
    webhook_secret: ${TELEGRAM_WEBHOOK_SECRET}
  slack:
    mode: http
"""

PARTIAL = """platforms:
  telegram:
    mode: webhook
    webhook_url: https://bot.example.org/telegram
"""

TOKENS = {"TELEGRAM_BOT_TOKEN": "1:tg", "DISCORD_BOT_TOKEN": "dc", "SLACK_BOT_TOKEN": "xoxb-1"}

SCENARIOS = {
    "all on, polling and socket mode": (
        "", None, {**TOKENS, "SLACK_APP_TOKEN": "xapp-1", "ANTHROPIC_API_KEY": "sk-ant"}, 0,
        screen(KEY_FROM_ENV, f"""\
    telegram  on   long polling
    discord   on   gateway connection, mentions and DMs only
    slack     on   Socket Mode

{READY_ALL}"""),
    ),
    "all on, webhook and http mode, through other servers": (
        WEBHOOK_HTTP, "SLACK_SIGNING_SECRET=signing\n",
        {**TOKENS, "TELEGRAM_WEBHOOK_SECRET": "whsecret", "ANTHROPIC_API_KEY": "sk-ant"}, 0,
        screen(KEY_FROM_ENV, f"""\
    telegram  on   webhook https://bot.example.org/telegram, listening on 0.0.0.0:8444 via http://127.0.0.1:8081
    discord   on   gateway connection, message content intent on via http://127.0.0.1:8082/api / gateway.discord.gg
    slack     on   HTTP events on 127.0.0.1:3001/events via http://127.0.0.1:8083/api/

{READY_ALL}"""),
    ),
    "enabled without its mode's settings, disabled, part of the credentials": (
        BLOCKED, "SLACK_SIGNING_SECRET=\n", TOKENS, 2,
        screen(NO_KEY, """\
    telegram  off  incomplete credentials
    discord   off  disabled in config (enabled: false)
    slack     off  incomplete credentials

Not ready to run:
  - telegram is enabled: set platforms.telegram.webhook_url; set platforms.telegram.webhook_secret \
(platforms.telegram.webhook_url and platforms.telegram.webhook_secret are not in {home}/config.yaml)
  - slack has only part of its credentials: set SLACK_SIGNING_SECRET or platforms.slack.signing_secret \
(SLACK_SIGNING_SECRET is not set in the environment and empty in {home}/.env; platforms.slack.signing_secret \
is not in {home}/config.yaml)
""" + MODEL_BLOCKER.replace("{state}", "set neither in the environment nor in {home}/.env")),
    ),
    "polling timeouts that do not fit, enabled without tokens, references to empty variables": (
        STALLED, None, {"TELEGRAM_BOT_TOKEN": "1:tg", "MY_SLACK": ""}, 2,
        screen("no key (MY_KEY and ANTHROPIC_API_KEY are not set in the environment and there is no {home}/.env)", """\
    telegram  off  polling timeouts do not fit
    discord   off  incomplete credentials
    slack     off  incomplete credentials

Not ready to run:
  - telegram: platforms.telegram.stall_timeout (20 s) must be longer than poll_timeout (30 s); \
raise stall_timeout or lower poll_timeout
  - discord is enabled: set DISCORD_BOT_TOKEN or platforms.discord.token (DISCORD_BOT_TOKEN is not set in the \
environment and there is no {home}/.env; platforms.discord.token is not in {home}/config.yaml)
  - slack is enabled: set MY_SLACK or platforms.slack.bot_token; set SLACK_APP_TOKEN or platforms.slack.app_token \
(MY_SLACK is empty in the environment and there is no {home}/.env; SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set \
in the environment and there is no {home}/.env; platforms.slack.app_token is not in {home}/config.yaml; \
platforms.slack.bot_token in {home}/config.yaml refers to ${MY_SLACK} and ${SLACK_BOT_TOKEN})
  - no API key for the anthropic model 'claude-sonnet-4-6': set MY_KEY or model.api_key (MY_KEY and \
ANTHROPIC_API_KEY are not set in the environment and there is no {home}/.env; model.api_key in \
{home}/config.yaml refers to ${MY_KEY} and ${ANTHROPIC_API_KEY})"""),
    ),
    "nothing configured, variables empty here and there": (
        "", "TELEGRAM_BOT_TOKEN=\n", {"DISCORD_BOT_TOKEN": ""}, 2,
        screen(NO_KEY, """\
    telegram  off  no credentials (TELEGRAM_BOT_TOKEN is not set in the environment and empty in {home}/.env)
    discord   off  no credentials (DISCORD_BOT_TOKEN is empty in the environment and not in {home}/.env)
    slack     off  no credentials (SLACK_BOT_TOKEN and SLACK_APP_TOKEN are set neither in the environment nor \
in {home}/.env)

Not ready to run:
  - no platform is enabled: set TELEGRAM_BOT_TOKEN, or DISCORD_BOT_TOKEN, or SLACK_BOT_TOKEN with SLACK_APP_TOKEN \
(in the environment or {home}/.env), or the matching keys under platforms: in config.yaml (TELEGRAM_BOT_TOKEN is \
not set in the environment and empty in {home}/.env; DISCORD_BOT_TOKEN is empty in the environment and not in \
{home}/.env; SLACK_BOT_TOKEN and SLACK_APP_TOKEN are set neither in the environment nor in {home}/.env)
""" + MODEL_BLOCKER.replace("{state}", "set neither in the environment nor in {home}/.env")),
    ),
    "nothing configured in webhook and http mode": (
        NOTHING_IN_WEBHOOK_AND_HTTP, None, {}, 2,
        screen(NO_KEY_NO_DOTENV, """\
    telegram  off  no credentials (TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET are not set in the environment \
and there is no {home}/.env)
    discord   off  no credentials (DISCORD_BOT_TOKEN is not set in the environment and there is no {home}/.env)
    slack     off  no credentials (SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET are not set in the environment and \
there is no {home}/.env)

Not ready to run:
  - no platform is enabled: set TELEGRAM_BOT_TOKEN, or DISCORD_BOT_TOKEN, or SLACK_BOT_TOKEN with SLACK_APP_TOKEN \
(in the environment or {home}/.env), or the matching keys under platforms: in config.yaml (TELEGRAM_BOT_TOKEN, \
DISCORD_BOT_TOKEN, SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set in the environment and there is no {home}/.env)
""" + MODEL_BLOCKER.replace("{state}", "not set in the environment and there is no {home}/.env")),
    ),
    "part of the credentials in webhook and socket mode": (
        PARTIAL, None, {"SLACK_APP_TOKEN": "xapp-1", "ANTHROPIC_API_KEY": "k"}, 2,
        screen(KEY_FROM_ENV, """\
    telegram  off  incomplete credentials
    discord   off  no credentials (DISCORD_BOT_TOKEN is not set in the environment and there is no {home}/.env)
    slack     off  incomplete credentials

Not ready to run:
  - telegram has only part of its credentials: set TELEGRAM_BOT_TOKEN or platforms.telegram.token; set \
platforms.telegram.webhook_secret (TELEGRAM_BOT_TOKEN is not set in the environment and there is no {home}/.env; \
platforms.telegram.token and platforms.telegram.webhook_secret are not in {home}/config.yaml)
  - slack has only part of its credentials: set SLACK_BOT_TOKEN or platforms.slack.bot_token (SLACK_BOT_TOKEN is \
not set in the environment and there is no {home}/.env; platforms.slack.bot_token is not in {home}/config.yaml)"""),
    ),
}


@pytest.mark.parametrize(("config", "dotenv", "env", "status", "expected"), SCENARIOS.values(), ids=SCENARIOS)
def test_check_prints_the_whole_plan_unchanged(
    tmp_path: Path, config: str, dotenv: str | None, env: dict[str, str], status: int, expected: str
) -> None:
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    if dotenv is not None:
        (tmp_path / ".env").write_text(dotenv, encoding="utf-8")
    done = switchboard("check", home=tmp_path, **env)
    assert (done.returncode, done.stderr) == (status, "")
    assert done.stdout == expected.replace("{home}", str(tmp_path))


TRANSCRIPTION = {
    "OpenAI, key from the environment": (
        "media:\n  transcription: {model: gpt-4o-mini-transcribe, language: de}\n", {"OPENAI_API_KEY": "sk-voice-key-0123"},
        "transcribed by gpt-4o-mini-transcribe at api.openai.com (language de, timeout 120 s), key from OPENAI_API_KEY",
    ),
    "OpenAI without a key": (
        "media:\n  transcription: {model: whisper-1}\n", {},
        "transcribed by whisper-1 at api.openai.com (language detected, timeout 120 s), no key, which OpenAI refuses "
        "(OPENAI_API_KEY is not set in the environment and there is no {home}/.env; media.transcription.api_key is not "
        "in {home}/config.yaml)",
    ),
    "a local server, its key inline and credentials in its URL": (
        "media:\n  transcription:\n    base_url: http://user:pw@127.0.0.1:8000/v1\n    model: Systran/faster-whisper-small"
        "\n    api_key: local-key-0123\n    timeout: 300\n", {},
        "transcribed by Systran/faster-whisper-small at 127.0.0.1:8000 (language detected, timeout 300 s), "
        "key set in config.yaml",
    ),
    "a local server without a key": (
        "media:\n  transcription: {base_url: 'http://localhost:8000/v1'}\n", {},
        "transcribed by whisper-1 at localhost:8000 (language detected, timeout 120 s), no key (fine for a local server)",
    ),
    "media off": ("media:\n  enabled: false\n", {}, "not read (media.enabled is false: users are told files are not read here)"),
}  # fmt: skip


@pytest.mark.parametrize(("config", "env", "expected"), TRANSCRIPTION.values(), ids=TRANSCRIPTION)
def test_check_says_where_voice_notes_are_transcribed_and_never_shows_the_key(
    tmp_path: Path, config: str, env: dict[str, str], expected: str
) -> None:
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    done = switchboard("check", home=tmp_path, **env)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("  voice notes  ")]
    assert line == "  voice notes  " + expected.replace("{home}", str(tmp_path))
    assert "0123" not in done.stdout and "pw@" not in done.stdout


def test_check_lists_the_alert_destinations_without_the_webhooks_secrets(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "platforms:\n  slack: {enabled: false}\n"
        "alerts:\n  chats: [telegram:123456789, 'slack:C0123ABCD']\n  max_per_hour: 5\n"
        "  webhooks:\n    - url: ${ALERT_WEBHOOK_URL}\n      headers: {Authorization: 'Bearer hdr-secret-4567'}\n"
        "    - {url: 'https://ops:pw-9876@alerts.example.org/hook?key=q-secret-6543'}\n", encoding="utf-8")  # fmt: skip
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="123:abc", DISCORD_BOT_TOKEN="d-token",
                       ALERT_WEBHOOK_URL="https://hooks.slack.com/services/T000/B000/url-secret-1234")  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("  alerts       ")]
    assert line == (
        "  alerts       to telegram:123456789; slack:C0123ABCD (its platform is off: skipped); "
        "POST https://hooks.slack.com/[REDACTED] with header Authorization; POST https://alerts.example.org/[REDACTED]; "
        "at most 5 an hour to each"
    )
    for secret in ("url-secret-1234", "hdr-secret-4567", "pw-9876", "q-secret-6543", "T000"):
        assert secret not in done.stdout + done.stderr
