"""The switchboard command line as an operator uses it: --version, check, run refusing to start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from config.loader import EXAMPLE_PATH
from tests.gateway.processes import REPO, clean_env, switchboard

HEAVY_MODULES = ("aiogram", "discord", "slack_bolt", "slack_sdk", "anthropic", "openai")


def test_version(tmp_path: Path) -> None:
    done = switchboard("--version", home=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("switchboard ")


def test_version_and_check_import_no_platform_library_or_sdk(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from gateway.operations.cli import main\n"
        "for argv in (['check'], ['--version']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_check_prints_the_plan_for_the_example_config(tmp_path: Path) -> None:
    done = switchboard(
        "check", "--config", str(EXAMPLE_PATH), home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x"
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"config file  {EXAMPLE_PATH}" in out
    assert f"database     SQLite, {tmp_path / 'state.db'} (synchronous=normal)" in out
    assert f"log file     {tmp_path / 'logs' / 'gateway.log'}" in out
    assert "anthropic / claude-sonnet-4-6, key from ANTHROPIC_API_KEY" in out
    assert "telegram  on   long polling" in out
    assert f"discord   off  no credentials (DISCORD_BOT_TOKEN is not set in the environment and there is no {tmp_path / '.env'})" in out
    assert "Ready: `switchboard run` would start telegram." in out
    assert "sk-ant-x" not in out
    assert not (tmp_path / "state.db").exists(), "check must not touch the database"


def test_check_without_credentials_explains_and_exits_2(tmp_path: Path) -> None:
    done = switchboard("check", home=tmp_path)
    assert done.returncode == 2
    assert "Not ready to run:" in done.stdout
    assert "TELEGRAM_BOT_TOKEN" in done.stdout and "ANTHROPIC_API_KEY" in done.stdout


def test_broken_config_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("compression:\n  threshold: 1.5\n  treshold: 0.5\nlogging:\n  format: xml\n", encoding="utf-8")
    for command in ("check", "run"):
        done = switchboard(command, "--config", str(bad), home=tmp_path)
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            f"configuration error in {bad} (3 problems):",
            "  - compression.threshold: must be between 0 and 1, got 1.5",
            "  - compression.treshold: unknown key (did you mean 'threshold'?)",
            "  - logging.format: must be 'text' or 'json', got 'xml'",
        ]


def test_yaml_syntax_error_exits_2_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {name: [x\n", encoding="utf-8")
    done = switchboard("check", "--config", str(bad), home=tmp_path)
    assert done.returncode == 2
    assert "line 2, column 1:" in done.stderr


def test_run_without_credentials_exits_2_and_names_what_to_set(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    done = switchboard("run", home=home)
    assert done.returncode == 2
    assert "Switchboard cannot start:" in done.stderr
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY", str(home / ".env")):
        assert name in done.stderr
    # First run laid out the home for the operator to fill in.
    assert (home / "config.yaml").is_file() and (home / ".env").is_file()
    assert "run.blocked" in (home / "logs" / "gateway.log").read_text()


def test_run_with_platform_but_no_model_key_names_the_key(tmp_path: Path) -> None:
    done = switchboard("run", home=tmp_path, DISCORD_BOT_TOKEN="abc")
    assert done.returncode == 2
    (line,) = [l for l in done.stderr.splitlines() if l.startswith("  - ")]
    assert "ANTHROPIC_API_KEY" in line and "model.api_key" in line


def test_no_command_prints_help(tmp_path: Path) -> None:
    done = switchboard(home=tmp_path)
    assert done.returncode == 2
    assert "usage: switchboard" in done.stdout


def test_the_command_line_starts_without_loading_the_agent(tmp_path: Path) -> None:
    # Every command builds the whole parser, so its modules are loaded at each start; the agent
    # package (imported whole, through its surface) is loaded by the commands that use it.
    script = "import sys\nimport gateway.operations.cli\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'agent'))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
