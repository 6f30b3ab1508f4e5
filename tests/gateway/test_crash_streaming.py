"""Crash safety of streamed replies: SIGKILL the real gateway process mid-stream, restart, and look at every message.

The relay platform (:mod:`tests.fakes.relay_platform`) lives in the test process and its
messages can be edited (``--relay-edits``), so replies stream by send-then-edit. Each chat asks
for a long answer that the fake model writes slowly; once every chat shows a half-written
answer, the gateway is killed with SIGKILL and started again on the same home. Afterwards each
chat must have exactly one message from the bot, showing the whole answer (the replayed turn
edits the streamed message, never posts a second one), and the database must hold nothing
unfinished and no live row. Nothing is timed: the waits only stop a hang.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage import open_store
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.relay_platform import RelayPlatform
from tests.gateway.conftest import write_config
from tests.gateway.engines import database_of, storage_config
from tests.gateway.processes import REPO, clean_env, terminate
from tests.waiting import eventually

pytestmark = [pytest.mark.timeout(300), pytest.mark.both_engines]  # starts the real gateway twice: slow when busy

CHATS = 6
HANG_GUARD = 180.0


def answer_for(user_text: str) -> str:
    """The fake model's answer: long, naming the question, a sentence at a time."""
    return " ".join(f"Part {n} of the answer to {user_text.strip()} goes on." for n in range(1, 11))


def launch(home: Path, config: Path, relay_url: str) -> subprocess.Popen[bytes]:
    with (home / "stderr.txt").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config), "--relay", relay_url,
             "--relay-edits"],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip


async def test_sigkill_mid_stream_each_streamed_message_is_finished_once(
    tmp_path: Path, model_server: ModelServer, relay: RelayPlatform, storage_url: str | None
) -> None:
    model_server.responder = lambda record: Text(answer_for(record.last_user_text), pace=6)  # ~12 s an answer
    home = tmp_path / "home"
    config = write_config(home, model_server, storage_config(storage_url))
    log_path = home / "logs" / "gateway.log"
    questions = {f"chat-{n}": f"question {n}" for n in range(CHATS)}

    first = launch(home, config, relay.base_url)
    try:
        await eventually(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"),
                         "the first start", process=first, timeout=HANG_GUARD)  # fmt: skip
        for chat, question in questions.items():
            await relay.post(chat, question)
        # Every chat shows a half-written answer (sent, and edited at least once for most).
        await eventually(lambda: {s.chat_id for s in relay.sent} == set(questions) and len(relay.edits) >= CHATS,
                         "a streamed message in every chat", process=first, timeout=HANG_GUARD)  # fmt: skip
    finally:
        first.kill()
        await asyncio.to_thread(first.wait)
    assert first.returncode == -signal.SIGKILL
    half = {s.chat_id: relay.showing[s.message_id] for s in relay.sent}
    assert all(text != answer_for(questions[chat]) for chat, text in half.items()), "the kill came too late"

    second = launch(home, config, relay.base_url)
    try:
        def finished() -> bool:
            return all(relay.showing[s.message_id] == answer_for(questions[s.chat_id]) for s in relay.sent)

        await eventually(finished, "every streamed message edited to its whole answer", process=second,
                         timeout=HANG_GUARD)  # fmt: skip
    finally:
        code = await terminate(second, limit=HANG_GUARD)
    assert code == 0, (home / "stderr.txt").read_text("utf-8")[-3000:]

    per_chat = {chat: [s for s in relay.sent if s.chat_id == chat] for chat in questions}
    assert {chat: len(sent) for chat, sent in per_chat.items()} == {chat: 1 for chat in questions}  # no duplicate
    assert relay.repeats == []
    for chat, (message,) in per_chat.items():
        assert relay.showing[message.message_id] == answer_for(questions[chat])  # nothing left half
        assert message.reply_to is not None
    store = await open_store(database_of(home, storage_url))
    try:
        assert await store.inbox_unfinished() == []
        assert await store.outbox_pending() == []
        assert await store.outbox_live() == []
    finally:
        await store.close()
