"""An empty variable (`TELEGRAM_BOT_TOKEN=` from deploy/.env.example under compose's env_file or systemd's
EnvironmentFile) counts as unset: the home's .env fills it in, and when a value is found nowhere the
message says where it was looked for and what was there.
"""

from __future__ import annotations

from pathlib import Path

from tests.gateway.processes import switchboard

EMPTY = {"TELEGRAM_BOT_TOKEN": "", "ANTHROPIC_API_KEY": "", "DISCORD_BOT_TOKEN": ""}
"""What deploy/.env.example puts in the environment when it is used unfilled."""


def test_the_homes_dotenv_fills_in_variables_the_environment_has_empty(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TELEGRAM_BOT_TOKEN=123456:from-dotenv\nANTHROPIC_API_KEY='sk-ant-from-dotenv'\n",
                                   encoding="utf-8")  # fmt: skip
    done = switchboard("check", home=tmp_path, **EMPTY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "telegram  on   long polling" in done.stdout
    assert "anthropic / claude-sonnet-4-6, key from ANTHROPIC_API_KEY" in done.stdout


def test_a_value_found_nowhere_is_explained_place_by_place(tmp_path: Path) -> None:
    home_env = tmp_path / ".env"
    home_env.write_text("# filled in later\nANTHROPIC_API_KEY=\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text("platforms:\n  telegram:\n    enabled: true\n", encoding="utf-8")
    for command in ("check", "run"):
        done = switchboard(command, home=tmp_path, **EMPTY)
        assert done.returncode == 2, done.stdout + done.stderr
        blockers = [line[4:] for line in (done.stdout + done.stderr).splitlines() if line.startswith("  - ")]
        telegram, model = blockers
        assert telegram.startswith("telegram is enabled: set TELEGRAM_BOT_TOKEN"), telegram
        assert (f"TELEGRAM_BOT_TOKEN is empty in the environment and not in {home_env}; "
                f"platforms.telegram.token is not in {config}") in telegram, telegram  # fmt: skip
        assert model.startswith("no API key for the anthropic model 'claude-sonnet-4-6': set ANTHROPIC_API_KEY"), model
        assert (f"ANTHROPIC_API_KEY is empty in the environment and in {home_env}; "
                f"model.api_key is not in {config}") in model, model  # fmt: skip
        assert "not set" not in telegram + model


def test_the_plan_says_which_variables_were_empty(tmp_path: Path) -> None:
    done = switchboard("check", home=tmp_path, **EMPTY)
    assert f"discord   off  no credentials (DISCORD_BOT_TOKEN is empty in the environment and there is no {tmp_path / '.env'})" \
        in done.stdout, done.stdout  # fmt: skip
    assert f"slack     off  no credentials (SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set in the environment and " \
        f"there is no {tmp_path / '.env'})" in done.stdout, done.stdout  # fmt: skip
    (tmp_path / ".env").write_text("SLACK_APP_TOKEN=\nthis line is not a variable\n", encoding="utf-8")
    done = switchboard("check", home=tmp_path, **EMPTY)
    assert f"slack     off  no credentials (SLACK_BOT_TOKEN is set neither in the environment nor in {tmp_path / '.env'} " \
        "(python-dotenv could not parse its line 2); SLACK_APP_TOKEN is not set in the environment and empty in " \
        f"{tmp_path / '.env'})" in done.stdout, done.stdout  # fmt: skip
