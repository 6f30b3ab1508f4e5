"""SIGKILL in the middle of a burst over Telegram, restart, and account for every message.

The gateway runs as a real ``python -m gateway.operations.cli run`` process with the
real Telegram adapter; the Bot API emulator lives in the test process, so the
updates not yet confirmed and the messages already delivered survive the
kill, as they do on Telegram. 200 messages over 20 private chats arrive in
rounds; once replies naming 40 of them were delivered the gateway is killed,
then started again on the same home while the burst goes on.

Afterwards every message must be named by exactly one reply, each chat's
messages answered in order. Telegram has no idempotency key, so one repeat is
possible and allowed: a chunk Telegram accepted just before the kill, which
the first run had not yet recorded as sent (no ``delivery.sent`` line for it),
is sent again by the second run (the outbox then holds one row for the copies). Any other repeat
fails the test. Nothing is
timed: the waits only stop a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import BotMessage, TelegramAPI, User
from tests.gateway.conftest import write_config
from tests.gateway.processes import REPO, clean_env
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway process, several times: slow on a busy machine

CHATS = 20
PER_CHAT = 10
KILL_AFTER_ANSWERED = 40
HANG_GUARD = 180.0
TAG = re.compile(r"c(\d\d)-m(\d\d)")
RESUMED = re.compile(r"delivery\.resumed chunks=(\d+)")
USERS = [User(id=5000 + n, first_name=f"User {n}") for n in range(CHATS)]


def launch(home: Path, config: Path) -> subprocess.Popen[bytes]:
    with (home / "stderr.txt").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.operations.cli", "run", "--config", str(config)],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip



async def until(predicate: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    await eventually(predicate, what, process=process, timeout=HANG_GUARD)


def named(replies: list[BotMessage]) -> Counter[str]:
    return Counter(match.group(0) for reply in replies for match in TAG.finditer(reply.visible))


def without_crash_window_repeats(sent: list[BotMessage], db_path: Path) -> list[BotMessage]:
    """The replies with allowed repeats removed; an unexplained repeat fails the test.

    A repeat is allowed when the copies are one outbox chunk sent again: the outbox records exactly
    one of the copies' message ids (the last send). A turn answered twice would have two rows.
    """
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        recorded = {(int(chat), int(mid)) for chat, mid in db.execute(
            "SELECT chat_id, platform_message_id FROM outbox WHERE platform = 'telegram' AND status = 'sent'")}  # fmt: skip
    groups: dict[tuple[int, str], list[BotMessage]] = {}
    for message in sent:
        groups.setdefault((message.chat_id, message.visible), []).append(message)
    for copies in groups.values():
        in_outbox = [m for m in copies if (m.chat_id, m.message_id) in recorded]
        assert in_outbox == [copies[-1]], f"not one chunk sent again: {copies}"
    assert len(recorded) == len(groups)
    return [copies[0] for copies in groups.values()]


async def test_sigkill_mid_burst_over_telegram_loses_nothing_and_answers_once_in_order(
    tmp_path: Path, model_server: ModelServer
) -> None:
    api = TelegramAPI()
    await api.start()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.latency = 0.1
    home = tmp_path / "home"
    telegram = {"token": api.token, "api_base_url": api.base_url, "allow_all": True, "poll_timeout": 1}
    config = write_config(home, model_server, {"platforms": {"telegram": telegram}})
    log_path = home / "logs" / "gateway.log"
    messages = [(USERS[c], f"c{c:02d}-m{m:02d}") for m in range(PER_CHAT) for c in range(CHATS)]
    texts = {text for _, text in messages}

    async def feed() -> None:
        for index, (user, text) in enumerate(messages, 1):
            await api.say(user, text)
            if index % CHATS == 0:
                await asyncio.sleep(0.1)  # pacing, part of the scenario: users write over time, not all at once

    feeder: asyncio.Task[None] | None = None
    try:
        first = launch(home, config)
        try:
            await until(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"), first, "start")
            feeder = asyncio.create_task(feed())
            await until(lambda: len(named(api.sent)) >= KILL_AFTER_ANSWERED, first, "the first answers")
        finally:
            first.kill()
            await asyncio.to_thread(first.wait)
        assert first.returncode == -signal.SIGKILL
        answered_at_kill, unconfirmed_at_kill = len(named(api.sent)), len(api.updates)
        offset = log_path.stat().st_size

        second = launch(home, config)
        try:
            await feeder
            await until(lambda: texts <= set(named(api.sent)), second, "a reply naming every message")
            await until(lambda: not api.updates, second, "every update to be confirmed")
        finally:
            second.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(second.wait, HANG_GUARD)
        assert code == 0, (home / "stderr.txt").read_text("utf-8")[-3000:]
    finally:
        if feeder is not None:
            feeder.cancel()
        await api.stop()
    assert answered_at_kill < len(messages), "the kill did not land in the middle of the burst"

    log_text = log_path.read_bytes().decode("utf-8", errors="replace")
    replies = without_crash_window_repeats(api.sent, home / "state.db")
    counts = named(replies)
    assert {text for text, n in counts.items() if n > 1} == set()
    assert set(counts) == texts
    message_ids = {update["message"]["text"]: update["message"]["message_id"] for update in api.all_updates}
    for user in USERS:
        chat_replies = [r for r in replies if r.chat_id == user.id]
        numbers = [int(m.group(2)) for r in chat_replies for m in TAG.finditer(r.visible)]
        assert numbers == list(range(PER_CHAT)), (user.id, [r.visible for r in chat_replies])
        for reply in chat_replies:
            last = TAG.findall(reply.visible)[-1]
            assert reply.reply_to == message_ids[f"c{last[0]}-m{last[1]}"], reply
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        assert db.execute("SELECT count(*), sum(status = 'done') FROM inbox").fetchone() == (len(messages), len(messages))
    second_log = log_text[offset:]
    print(
        f"\ntelegram crash: answered at kill {answered_at_kill}/{len(messages)}, unconfirmed {unconfirmed_at_kill}, "
        f"duplicates skipped {second_log.count('inbound.duplicate')}, repeats {len(api.sent) - len(replies)}, "
        f"resent chunks {sum(int(n) for n in RESUMED.findall(second_log))}, "
        f"replies {len(replies)}"
    )
