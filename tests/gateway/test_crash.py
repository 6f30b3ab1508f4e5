"""Crash safety of the real process: SIGKILL in the middle of a burst, restart, and account for every message.

The platform (:mod:`tests.fakes.relay_platform`) lives in the test process, so
the user messages not yet acknowledged and the replies already delivered
survive the gateway being killed. 200 messages over 20 chats arrive in rounds
(one message per chat, then a short pause); once replies naming 40 of them
were delivered, the gateway is killed with SIGKILL while the rest of the burst
keeps arriving, then started again on the same home. Afterwards every message
must be named by exactly one reply (the fake model answers ``"re: " + the
turn's user text``, and messages that arrive during a turn are answered
together by the next one), no reply may have been delivered twice, each chat's
messages must be answered in order, and the database must hold nothing
unfinished. Nothing is timed: the waits only stop a hang.
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

from storage import open_store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.relay_platform import RelayPlatform, Sent
from tests.gateway.conftest import GatewayFactory, handled, write_config
from tests.gateway.engines import count, database_of, storage_config
from tests.gateway.processes import REPO, clean_env
from tests.gateway.processes import terminate
from tests.waiting import eventually

pytestmark = [pytest.mark.timeout(300), pytest.mark.both_engines]  # starts the real gateway, several times: slow

CHATS = 20
PER_CHAT = 10
KILL_AFTER_ANSWERED = 40
"""Messages named by delivered replies before the SIGKILL (a fifth of the burst)."""
HANG_GUARD = 180.0
TAG = re.compile(r"c(\d\d)-m(\d\d)")


def chat_name(chat: int) -> str:
    return f"chat-{chat:02d}"


def burst() -> list[tuple[str, str]]:
    """``(chat, text)`` in arrival order: round robin over the chats, each chat's messages numbered."""
    return [(chat_name(c), f"c{c:02d}-m{m:02d}") for m in range(PER_CHAT) for c in range(CHATS)]


def named(replies: list[Sent]) -> Counter[str]:
    """How many replies name each message text."""
    return Counter(match.group(0) for reply in replies for match in TAG.finditer(reply.text))


def launch(home: Path, config: Path, relay_url: str) -> subprocess.Popen[bytes]:
    with (home / "stderr.txt").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config), "--relay", relay_url],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip



async def until(predicate: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    await eventually(predicate, what, process=process, timeout=HANG_GUARD)




def by_chat(replies: list[Sent]) -> dict[str, list[Sent]]:
    chats: dict[str, list[Sent]] = {}
    for reply in replies:
        chats.setdefault(reply.chat_id, []).append(reply)
    return chats


def check_replies(relay: RelayPlatform, texts: set[str]) -> None:
    """Exactly one reply per message, none delivered twice, in order per chat, each replying to its last message."""
    counts = named(relay.sent)
    twice = {text for text, n in counts.items() if n > 1}
    assert twice == set(), [r for r in relay.sent if twice & set(named([r]))]
    assert set(counts) == texts
    by_text = {update.text: update for update in relay.updates}
    for chat, replies in by_chat(relay.sent).items():
        assert [t for t, n in Counter(r.text for r in replies).items() if n > 1] == [], chat
        covered = [set(named([r])) for r in replies]
        assert all(a.isdisjoint(b) for i, a in enumerate(covered) for b in covered[i + 1 :]), chat
        assert all(by_text[t].chat_id == chat for names in covered for t in names), chat
        numbers = [int(m.group(2)) for r in replies for m in TAG.finditer(r.text)]
        assert numbers == list(range(PER_CHAT)), (chat, [r.text for r in replies])
        for reply in replies:
            last = [m.group(0) for m in TAG.finditer(reply.text)][-1]
            assert reply.reply_to == by_text[last].message_id, (chat, reply)


def check_repeats(relay: RelayPlatform, first_log: str) -> None:
    """A chunk sent again (and dropped by its nonce) must be the one crash window the outbox leaves open:
    the platform had accepted it, but the first run died before recording it (delivery.sent is logged after)."""
    first_by_nonce = {s.nonce: s for s in relay.sent if s.nonce}
    for repeat in relay.repeats:
        assert first_by_nonce[repeat.nonce].text == repeat.text, repeat
        assert f"message_id={repeat.message_id} " not in first_log, repeat


async def check_database(database: str, relay: RelayPlatform, events: int) -> None:
    """Nothing unfinished, every event stored once and done, the stored replies are the delivered ones."""
    delivered = by_chat(relay.sent)
    store = await open_store(database)
    try:
        assert await store.inbox_unfinished() == []
        assert await store.outbox_pending() == []
        sessions = await store.list_sessions(platform="relay", limit=100)
        assert sorted(s.chat_id for s in sessions) == sorted(delivered)
        for session in sessions:
            stored = await store.load_messages(session.id)
            roles = [m.role for m in stored]
            assert roles == ["user", "assistant"] * (len(roles) // 2), (session.chat_id, roles)
            assert [m.content for m in stored if m.role == "assistant"] == [r.text for r in delivered[session.chat_id]]
    finally:
        await store.close()
    done = "SELECT count(*), count(*) FILTER (WHERE status = 'done') FROM inbox"
    assert await count(database, done) == (events, events)


async def test_sigkill_mid_burst_every_message_answered_once_in_order(
    tmp_path: Path, model_server: ModelServer, relay: RelayPlatform, storage_url: str | None
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.latency = 0.1  # think time, so messages queue behind running turns and are answered together
    home = tmp_path / "home"
    config = write_config(home, model_server, storage_config(storage_url))
    log_path = home / "logs" / "gateway.log"
    messages = burst()

    async def feed() -> None:
        for index, (chat, text) in enumerate(messages, 1):
            await relay.post(chat, text)
            if index % CHATS == 0:
                await asyncio.sleep(0.1)  # pacing, part of the scenario: users write over time, not all at once

    feeder: asyncio.Task[None] | None = None
    try:
        first = launch(home, config, relay.base_url)
        try:
            await until(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"), first, "start")
            feeder = asyncio.create_task(feed())
            await until(lambda: len(named(relay.sent)) >= KILL_AFTER_ANSWERED, first, "the first answers")
        finally:
            first.kill()
            await asyncio.to_thread(first.wait)
        assert first.returncode == -signal.SIGKILL
        answered_at_kill, unacknowledged_at_kill = len(named(relay.sent)), len(relay.unacknowledged())

        offset = log_path.stat().st_size
        second = launch(home, config, relay.base_url)
        try:
            await feeder
            texts = {text for _, text in messages}
            await until(lambda: texts <= set(named(relay.sent)), second, "a reply naming every message")
        finally:
            code = await terminate(second, limit=HANG_GUARD)
        assert code == 0, (home / "stderr.txt").read_text("utf-8")[-3000:]
    finally:
        if feeder is not None:
            feeder.cancel()
    assert answered_at_kill < len(messages), "the kill did not land in the middle of the burst"

    check_replies(relay, texts)
    log_bytes = log_path.read_bytes()
    check_repeats(relay, log_bytes[:offset].decode("utf-8", errors="replace"))
    await check_database(database_of(home, storage_url), relay, len(messages))

    # The second run picked up what the first left unfinished.
    second_log = log_bytes[offset:].decode("utf-8", errors="replace")
    replayed = int(re.search(r"gateway\.started .*replayed=(\d+)", second_log).group(1))  # type: ignore[union-attr]
    if replayed:
        assert f"inbound.replayed events={replayed}" in second_log
    resent = sum(int(n) for n in re.findall(r"delivery\.resumed chunks=(\d+)", second_log))
    print(
        f"\ncrash: answered at kill {answered_at_kill}/{len(messages)}, unacknowledged {unacknowledged_at_kill}, "
        f"replayed {replayed}, resumed turns {second_log.count('turn.resumed')}, resent chunks {resent}, "
        f"duplicates skipped {second_log.count('inbound.duplicate')}, repeats dropped by nonce {len(relay.repeats)}, "
        f"replies {len(relay.sent)}"
    )


@pytest.mark.sqlite_only  # edits state.db behind the gateway's back
async def test_a_reply_is_not_sent_again_when_the_crash_came_while_its_events_were_marked_done(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    """The crash left the first of a turn's two events done and the second not: the resumed turn is the same turn."""
    running = await start_gateway()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.latency = 0.3
    await running.adapter.inject("first")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await running.adapter.inject("second")
    third = await running.adapter.inject("third")
    sent = await running.adapter.wait_sent(2)
    assert sent[1].text == "re: second\n\nthird"
    await handled(running.store)
    await running.gateway.shutdown()
    # As if killed between the turn's two inbox_mark_done calls.
    with contextlib.closing(sqlite3.connect(running.home / "state.db")) as db, db:
        db.execute("UPDATE inbox SET status = 'accepted', done_at = NULL WHERE event_id = ?", (third.event_id,))

    restarted = await start_gateway(home=running.home, adapter=LoopbackAdapter())
    await handled(restarted.store)
    assert restarted.adapter.sent == []
    assert len(model_server.requests) == 2
