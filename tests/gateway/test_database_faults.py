"""A database that lets a running turn down: it is tried again, answered once and in order, and the user is told.

Each fault is the real one, made from outside the gateway: another process holding the write lock
(``tests/storage/lock_holder.py``), a full disk (the database on a small tmpfs, filled up), an
immutable ``-wal`` file (``chattr +i``: every write fails with SQLite's I/O error), a damaged page of
the ``messages`` table. The fake model is held (``ModelServer.gate``) so a later message of the same
chat can arrive while the first one's turn is running, before the fault starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.turn.conversations import Conversations
from storage import RetryPolicy
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import GatewayFactory, Running
from tests.gateway.database_damage import damage_page_holding
from tests.waiting import eventually

LOCK_HOLDER = Path(__file__).parents[1] / "storage" / "lock_holder.py"
FAST_WRITER = RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.02)
"""The store's own retries on a lock, made short: the turn's retries are what is tested here."""
QUICK_RETRIES = {"gateway": {"database_retry_notice_after": 0, "database_retry_max_delay": 0.1}}


def echo(record) -> Text:  # type: ignore[no-untyped-def]
    return Text("re: " + record.last_user_text)


BIG = " and so on" * 40_000
"""More than the WAL file held before (about 400 kB after start): storing this answer needs room on the disk."""


def squeezed(text: str) -> str:
    """``text`` without whitespace: a long reply arrives in chunks cut at spaces."""
    return "".join(text.split())


def big_echo(record) -> Text:  # type: ignore[no-untyped-def]
    """Echo, and a long answer to "first" (the turn that meets the full disk)."""
    return Text("re: " + record.last_user_text + (BIG if record.last_user_text == "first" else ""))


def idle(running: Running) -> bool:
    """No turn runs or waits (a lane exists from a message's arrival until its chat has nothing left to do)."""
    return len(running.gateway.lanes) == 0


def tries(running: Running, fault: str) -> float:
    """How often turns were tried again after meeting ``fault`` (``switchboard_turn_retries_total``)."""
    return running.gateway.metrics.turn_retries.totals.get((fault,), 0.0)


def notices(running: Running, chat: str = "chat-1") -> list[str]:
    return [text for text in running.adapter.texts(chat) if not text.startswith("re: ")]


async def stuck(running: Running, model_server: ModelServer, gate: asyncio.Event) -> None:
    """"first" is in its turn, waiting for the model; "second" arrived meanwhile and waits behind it."""
    await running.adapter.inject("first")
    await eventually(lambda: len(model_server.requests) == 1)
    await running.adapter.inject("second")


async def answered_in_order(running: Running) -> None:
    await eventually(lambda: len([t for t in running.adapter.texts() if t.startswith("re: ")]) >= 2)
    await eventually(lambda: idle(running))
    replies = [t for t in running.adapter.texts() if t.startswith("re: ")]
    assert replies == ["re: first", "re: second"]
    assert await running.store.inbox_unfinished() == []
    assert await running.store.outbox_pending() == []


@contextlib.asynccontextmanager
async def lock_held(db_path: Path) -> AsyncIterator[None]:
    """Another process holds the database's write lock until the block ends."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable, str(LOCK_HOLDER), str(db_path), "-", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert await holder.stdout.readline() == b"locked\n"
        yield
    finally:
        holder.stdin.close()
        await holder.wait()


async def test_a_turn_that_meets_a_lock_held_by_another_process_is_answered_once_in_order_with_one_notice(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(QUICK_RETRIES, store_retry=FAST_WRITER)
    model_server.responder = echo
    model_server.gate = gate = asyncio.Event()
    await stuck(running, model_server, gate)
    async with lock_held(running.home / "state.db"):
        gate.set()
        # Before: the turn failed (lane.turn_failed), "second" was tried and failed too, nothing was sent.
        await eventually(lambda: notices(running) or idle(running))
        assert len(notices(running)) == 1, running.adapter.texts()
        await eventually(lambda: tries(running, "locked") >= 5)  # several more tries: still one notice, no answer
        assert running.adapter.texts() == notices(running)
        assert running.gateway.lanes.queued() == 1  # "second" waits behind it
    await answered_in_order(running)
    notice, *_ = running.adapter.texts()
    assert "delayed" in notice and running.adapter.texts() == [notice, "re: first", "re: second"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs (only a root with mount rights can make one: skipped elsewhere)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False) if shutil.which("mount") and os.geteuid() == 0 else None  # fmt: skip
    if made is None or made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip() if made else 'not root'}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk``; remove the returned file to give them back."""
    filler = disk / "filler"
    block = b"\0" * 65536
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(block)
    return filler


async def test_a_turn_that_meets_a_full_disk_is_answered_once_the_disk_has_room_and_health_says_why(
    start_gateway: GatewayFactory, model_server: ModelServer, small_disk: Path
) -> None:
    overrides = {**QUICK_RETRIES, "storage": {"path": str(small_disk / "state.db")}}
    running = await start_gateway(overrides)
    model_server.responder = big_echo
    model_server.gate = gate = asyncio.Event()
    await stuck(running, model_server, gate)
    filler = fill(small_disk)
    gate.set()
    await eventually(lambda: notices(running) or idle(running))
    health = await running.gateway.snapshot()
    assert health["status"] == "degraded" and health["database"]["ok"] is False, health
    assert "full" in health["database"]["reason"], health
    assert len(notices(running)) == 1 and running.gateway.lanes.queued() == 1
    filler.unlink()
    await eventually(lambda: running.adapter.texts()[-1:] == ["re: second"])
    assert squeezed("".join(running.adapter.texts()[1:-1])) == squeezed("re: first" + BIG)  # in chunks, each once
    assert await running.store.inbox_unfinished() == []
    assert (await running.gateway.snapshot())["database"]["ok"] is True


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: not even root can write the file until the block ends (ext4, xfs, btrfs)."""
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i does not work here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def test_a_turn_that_meets_an_io_error_is_tried_again_until_the_file_can_be_written(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(QUICK_RETRIES)
    model_server.responder = echo
    model_server.gate = gate = asyncio.Event()
    await stuck(running, model_server, gate)
    with immutable(running.home / "state.db-wal"):
        gate.set()
        await eventually(lambda: notices(running) or idle(running))
        assert len(notices(running)) == 1, running.adapter.texts()
        health = await running.gateway.snapshot()
        assert health["database"]["ok"] is False and "I/O error" in health["database"]["reason"], health
    await answered_in_order(running)
    assert len(notices(running)) == 1


async def test_a_bug_outside_the_model_call_is_tried_a_few_times_then_the_user_gets_the_apology(
    start_gateway: GatewayFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = await start_gateway(QUICK_RETRIES)
    model_server.responder = echo
    calls = 0
    real_open = Conversations.open

    async def broken_open(self, key):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    monkeypatch.setattr(Conversations, "open", broken_open)
    await running.adapter.inject("first")
    # Before: lane.turn_failed and nothing at all for the user (until a restart ran it again).
    await eventually(lambda: running.adapter.texts() or idle(running))
    await eventually(lambda: idle(running))
    [apology] = running.adapter.texts()
    assert apology.startswith("Sorry, something went wrong on my side") and "(reference: " in apology
    assert 1 < calls <= 3  # tried again, but not for ever
    assert await running.store.inbox_unfinished() == []  # answered (with the apology): not run on every start
    monkeypatch.setattr(Conversations, "open", real_open)
    await running.adapter.inject("second")
    await running.adapter.wait_sent(2)
    assert running.adapter.texts()[-1] == "re: second"


async def test_a_turn_that_meets_a_damaged_page_marks_the_database_degraded_and_tells_the_user_once(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    model_server.responder = echo
    first = await start_gateway()
    await first.adapter.inject("MARKER-OLD-CONVERSATION " * 20, chat_id="old")
    await first.adapter.wait_sent(1)
    for n in range(12):  # later pages of the table: the damaged one is not where new rows go
        await first.adapter.inject(f"later {n} " + "l" * 1500, chat_id="others")
        await first.adapter.wait_sent(2 + n)
    await first.gateway.shutdown()

    running = await start_gateway(QUICK_RETRIES, home=first.home)
    damage_page_holding(running.home / "state.db", "messages", b"MARKER-OLD-CONVERSATION")
    await running.adapter.inject("are you there?", chat_id="old", event_id="again-1")  # the first run used 1, 2...
    await running.adapter.inject("hello?", chat_id="old", event_id="again-2")
    # Before: both turns failed in silence (lane.turn_failed) and /health said the database was ok.
    await eventually(lambda: running.adapter.texts("old") or idle(running))
    [notice] = running.adapter.texts("old")
    assert "damaged" in notice
    health = await running.gateway.snapshot()
    assert health["status"] == "degraded" and health["database"]["ok"] is False, health
    assert "damaged" in health["database"]["reason"] and "switchboard restore" in health["database"]["hint"]
    # Other conversations, whose pages are sound, are answered; the damage stays reported.
    await running.adapter.inject("a new chat", chat_id="new", event_id="again-3")
    await eventually(lambda: running.adapter.texts("new") == ["re: a new chat"])
    assert (await running.gateway.snapshot())["database"]["ok"] is False
    await eventually(lambda: tries(running, "damaged") >= 5)  # more tries of the damaged chat: it was told once
    assert running.adapter.texts("old") == [notice]
