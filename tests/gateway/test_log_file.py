"""gateway.log as an operator reads it, written by the real `switchboard run` over Telegram (aiogram against the
emulator) with the real Anthropic SDK against the fake model server.

* ``logging.level: debug`` (the README's troubleshooting advice) shows why a message was skipped
  (``inbound.ignored``) but no message text: neither the user's words nor the reply, not through
  Switchboard's own lines and not through a library's (the SDK's request dump, the database
  driver's statements). Libraries stay at warning unless ``logging.libraries`` names them, and
  their debug lines need ``logging.include_content: true``.
* Costs are written in fixed point, so the README's "money spent" recipe adds up what was spent.
* A log file that cannot be written costs one line on stderr a minute, not a traceback per line.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import pytest

from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.builders import Chat, User
from tests.gateway.conftest import spoken
from tests.gateway.processes import REPO, clean_env, switchboard, terminate
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway process, several times: slow on a busy machine

HANG_GUARD = 120.0
ALICE = User(id=4242, first_name="Alice")
OTHERS = [User(id=4300 + n, first_name=f"User {n}") for n in range(3)]
STRANGER = User(id=777, first_name="Stranger")
GROUP = Chat(id=-100555, type="supergroup", title="Team")
SAID = "zebra-quartz-1187 what is the plan"
REPLIED = "marmot-violet-5521"
STRANGER_SAID = "heron-copper-3094 let me in"
LIBRARIES = ("aiosqlite", "anthropic", "httpx", "httpcore", "aiogram", "aiohttp", "asyncio")


def write_home(home: Path, model_server: ModelServer, api: TelegramAPI, logging: str, model: str = "") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.yaml"
    config.write_text(
        f"model:\n  api_key: test\n  base_url: {model_server.base_url}\n{model}"
        "health:\n  port: 0\nsessions:\n  debounce_ms: 0\ngateway:\n  drain_timeout: 5\n"
        f"platforms:\n  telegram:\n    token: \"{api.token}\"\n    api_base_url: {api.base_url}\n    poll_timeout: 1\n"
        f"    allowed_users: [{', '.join(repr(str(user.id)) for user in [ALICE, *OTHERS])}]\n"
        f"logging:\n  console: false\n{logging}",
        encoding="utf-8",
    )
    return config


async def run_turns(home: Path, api: TelegramAPI, turns: int) -> tuple[int, str]:
    """Start the gateway on ``home``, wait for ``turns`` replies and every update confirmed, stop it:
    its exit status and its stderr. Messages are put in the emulator beforehand (pending updates are fetched)."""
    stderr_path = home / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "gateway.operations.cli", "run"], cwd=REPO, env=clean_env(home),
                                   stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    try:
        await eventually(lambda: len(api.sent) >= turns, f"{turns} replies", process=process, timeout=HANG_GUARD)
        await eventually(lambda: not api.updates, "every update to be confirmed", process=process, timeout=HANG_GUARD)
    finally:
        code = await terminate(process, limit=HANG_GUARD)
    return code, stderr_path.read_text(encoding="utf-8", errors="replace")


def answer_with_marker(model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text(f"{REPLIED}: about {spoken(record.last_user_text)[:20]}")


async def alices_turn(home: Path, model_server: ModelServer, api: TelegramAPI, logging: str) -> str:
    """Alice says SAID (after anything the test queued), the gateway answers and stops: its gateway.log."""
    answer_with_marker(model_server)
    write_home(home, model_server, api, logging)
    await api.say(ALICE, SAID)
    code, stderr = await run_turns(home, api, 1)
    assert code == 0, stderr[-3000:]
    assert [m.visible for m in api.sent] == [f"{REPLIED}: about {SAID[:20]}"]
    return (home / "logs" / "gateway.log").read_text(encoding="utf-8")


async def test_debug_level_explains_skipped_messages_without_any_message_text(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    await telegram_api.say(STRANGER, STRANGER_SAID, chat=GROUP)
    log = await alices_turn(tmp_path, model_server, telegram_api, "  level: debug\n")

    # The README's advice still works: the skipped message is there with its reason, and debug lines are written.
    (ignored,) = [line for line in log.splitlines() if " inbound.ignored " in line]
    assert f"user={STRANGER.id}" in ignored and "reason=" in ignored
    assert " debug " in log
    # No message text, from anyone, anywhere.
    for text in ("zebra-quartz-1187", REPLIED, "heron-copper-3094"):
        assert text not in log, [line[:300] for line in log.splitlines() if text in line][:3]
    # Libraries stay at warning: none of their debug or info lines.
    chatty = [line for line in log.splitlines() if re.search(r" (debug|info) .* logger=", line)]
    assert chatty == [], chatty[:5]


async def test_a_library_named_in_the_config_is_logged_at_its_level(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    # The model SDK's HTTP client logs as httpx, or as httpx2 in builds that ship it under that name.
    log = await alices_turn(tmp_path, model_server, telegram_api, "  libraries:\n    httpx: info\n    httpx2: info\n")
    assert re.search(r" info  HTTP Request: POST http://127\.0\.0\.1:\d+/v1/messages .*logger=httpx2?\b", log), log[-3000:]
    assert "logger=aiosqlite" not in log and "logger=anthropic" not in log


def test_a_librarys_debug_lines_need_include_content(tmp_path: Path) -> None:
    """Most libraries' debug lines carry what they send and receive (the SDK's whole request, the database
    driver's statements with their values): naming one at debug is refused until content is allowed."""
    config = tmp_path / "config.yaml"
    config.write_text("logging:\n  libraries:\n    anthropic: debug\n    aiosqlite: debug\n    httpx: debug\n",
                      encoding="utf-8")  # fmt: skip
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x")
    assert done.returncode == 2
    (problem,) = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert problem.startswith("  - logging.libraries: anthropic and aiosqlite at debug write message text"), problem
    assert "logging.include_content: true" in problem
    config.write_text(config.read_text(encoding="utf-8") + "  include_content: true\n", encoding="utf-8")
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x")
    assert done.returncode == 0, done.stderr


async def test_include_content_lets_a_librarys_debug_lines_through(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    """The other side of the first test: the check there would see message text if it were written."""
    log = await alices_turn(tmp_path, model_server, telegram_api, "  include_content: true\n  libraries:\n    anthropic: debug\n")
    assert any("zebra-quartz-1187" in line and "logger=anthropic" in line for line in log.splitlines())


# --- costs -----------------------------------------------------------------------------------------------------


def readme_recipe(name: str) -> str:
    """The shell line the README gives for ``# <name>``, as printed there."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (line,) = [line for line in readme.splitlines() if line.rstrip().endswith(f"# {name}")]
    return line.rsplit("#", 1)[0].strip()


async def test_the_readmes_money_spent_recipe_adds_up_what_the_turns_cost(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    answer_with_marker(model_server)
    # Prices small enough that each turn costs well under a cent (where exponents used to appear).
    prices = "  prices:\n    claude-sonnet-4-6: {input: 0.01, output: 0.02, cache_read: 0.001, cache_write: 0.0125}\n"
    write_home(tmp_path, model_server, telegram_api, "", model=prices)
    for user in OTHERS:  # three chats: three turns
        await telegram_api.say(user, "what does it cost")
    code, stderr = await run_turns(tmp_path, telegram_api, len(OTHERS))
    assert code == 0, stderr[-3000:]
    logs = tmp_path / "logs"
    logged = [m.group(1) for m in re.finditer(r" turn\.done .*\bcost=(\S+)", (logs / "gateway.log").read_text("utf-8"))]
    assert len(logged) == len(OTHERS) and all(Decimal(cost) > 0 for cost in logged), logged
    assert all(re.fullmatch(r"\d+\.\d+", cost) for cost in logged), f"not fixed-point: {logged}"

    recipe = readme_recipe("money spent")
    assert recipe.endswith("| bc"), recipe
    summed = subprocess.run(["sh", "-c", recipe.removesuffix("| bc").strip()], cwd=logs, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert summed.returncode == 0, summed.stderr
    terms = summed.stdout.strip().split("+")
    assert terms == logged, "the recipe's grep does not take whole numbers"
    with closing(sqlite3.connect(tmp_path / "state.db")) as db:
        (spent,) = db.execute("SELECT sum(cost_usd) FROM usage").fetchone()
    total = sum(Decimal(term) for term in terms)
    assert abs(total - Decimal(str(spent))) <= Decimal("0.000001") * len(terms), (total, spent)
    if shutil.which("bc") is None:
        return  # the sum above is what bc would print
    whole = subprocess.run(["sh", "-c", recipe], cwd=logs, capture_output=True, text=True, timeout=60)
    assert whole.returncode == 0 and Decimal(whole.stdout.strip()) == total, whole


# --- a log file that cannot be written --------------------------------------------------------------------------


async def test_a_log_file_that_cannot_be_written_costs_one_stderr_line_a_minute(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI
) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here to stand for a full disk")
    answer_with_marker(model_server)
    write_home(tmp_path, model_server, telegram_api, "  file: full.log\n")
    (tmp_path / "full.log").symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    for user in OTHERS:
        await telegram_api.say(user, "anyone there")
    began = time.monotonic()
    code, stderr = await run_turns(tmp_path, telegram_api, len(OTHERS))
    minutes = int((time.monotonic() - began) // 60)  # a slow machine may see a second minute begin
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "Logging error" not in stderr, stderr[:3000]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 1 + minutes, lines[:10]
    assert str(tmp_path / "full.log") in lines[0] and "No space left on device" in lines[0], lines[0]
