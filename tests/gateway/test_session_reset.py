"""The session reset policies (``sessions.reset``: idle, daily, none) through the whole gateway.

Two seams. ``Store.open(clock=...)`` stamps every session start and message: most end-to-end tests
below hold the store's clock at a chosen moment in the past while the first turn is stored, then
let it follow the wall clock again, so the gateway, on the wall clock, sees a conversation whose
last message really is that old (margins of minutes to hours, never the test's own speed).
``Gateway(clock=...)`` is the clock its session policies read: with one fake clock for it and the
store, a test pins a boundary to the second through the whole gateway. The exact boundaries of
every policy are also checked on the smallest unit that holds them: ``Conversations`` with the
real store and agent and one fake clock shared by both.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.contract import ChatType
from config import load_config
from config.models import SessionsConfig
from gateway.agent_factory import build_agent
from gateway.turn.conversations import Conversations
from gateway.runner import search_function
from gateway.inbound.session_key import SessionKey
from storage import NewMessage, SessionRecord, Store
from tests.fakes.model_server import ModelServer, RequestRecord, Text
from tests.gateway.conftest import GatewayFactory, Running, settled, write_config

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL

HOUR = 3600.0
NOTE = re.compile(r"\[[^\]]*\]")
"""The gateway's call-time notes in a user message (such as why the session is new)."""
IDLE_NOTE = "ended after a long pause"
DAILY_NOTE = "start afresh every day"


class StoreClock:
    """The store's clock: the wall clock, or a fixed moment while ``at`` is set."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self) -> float:
        return time.time() if self.at is None else self.at


StartWithClock = Callable[[dict], Awaitable[tuple[Running, StoreClock]]]


@pytest_asyncio.fixture
async def start_gateway_with_store_clock(start_gateway: GatewayFactory) -> StartWithClock:
    """Like ``start_gateway``, with the store on a :class:`StoreClock` the test moves."""

    async def start(overrides: dict) -> tuple[Running, StoreClock]:
        clock = StoreClock()
        return await start_gateway(overrides, store_clock=clock), clock

    return start


def answering(model_server: ModelServer, text: str) -> RequestRecord:
    (request,) = [r for r in model_server.requests if NOTE.sub("", r.last_user_text).strip() == text]
    return request


async def first_turn_at(running: Running, clock: StoreClock, model_server: ModelServer, stamp: float) -> SessionRecord:
    """One question and answer, stored as if they happened at ``stamp``; returns its session."""
    model_server.responder = lambda record: Text("re: " + NOTE.sub("", record.last_user_text).strip())
    clock.at = stamp
    await running.adapter.inject("my number is 42")
    await running.adapter.wait_sent(1)
    await settled(running.store)
    clock.at = None
    (session,) = await running.store.list_sessions()
    stored = await running.store.load_messages(session.id)
    assert session.started_at == stamp and [m.created_at for m in stored] == [stamp, stamp]
    return session


async def second_turn(running: Running, model_server: ModelServer) -> tuple[list[SessionRecord], RequestRecord]:
    """Ask again now; returns the sessions (oldest first) and the model request that answered."""
    await running.adapter.inject("what is my number?")
    await running.adapter.wait_sent(2)
    await settled(running.store)
    assert running.adapter.texts() == ["re: my number is 42", "re: what is my number?"]  # the reply still comes
    sessions = sorted(await running.store.list_sessions(), key=lambda s: s.started_at)
    return sessions, answering(model_server, "what is my number?")


async def test_idle_a_message_after_the_idle_window_starts_a_new_session(
    start_gateway_with_store_clock: StartWithClock, model_server: ModelServer
) -> None:
    running, clock = await start_gateway_with_store_clock({"sessions": {"reset": "idle", "idle_minutes": 60}})
    old = await first_turn_at(running, clock, model_server, time.time() - 61 * 60)
    sessions, request = await second_turn(running, model_server)
    assert len(sessions) == 2
    ended, new = sessions
    assert ended.id == old.id and ended.end_reason == "idle" and ended.ended_at is not None
    assert new.is_open and new.id != old.id and new.session_key == old.session_key
    assert [m.content for m in await running.store.load_messages(new.id)] == ["what is my number?",
                                                                            "re: what is my number?"]  # fmt: skip
    assert "my number is 42" not in str(request.messages) and IDLE_NOTE in str(request.messages)


async def test_idle_a_message_inside_the_idle_window_continues_the_session(
    start_gateway_with_store_clock: StartWithClock, model_server: ModelServer
) -> None:
    running, clock = await start_gateway_with_store_clock({"sessions": {"reset": "idle", "idle_minutes": 60}})
    old = await first_turn_at(running, clock, model_server, time.time() - 50 * 60)
    sessions, request = await second_turn(running, model_server)
    (same,) = sessions
    assert same.id == old.id and same.is_open and same.end_reason is None
    assert [m.content for m in await running.store.load_messages(same.id)] == [
        "my number is 42", "re: my number is 42", "what is my number?", "re: what is my number?"
    ]  # fmt: skip
    assert "my number is 42" in str(request.messages) and IDLE_NOTE not in str(request.messages)


async def test_idle_through_the_gateway_the_window_ends_to_the_second(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    # One fake clock for the store and the gateway: a turn's messages are stamped with the moment it
    # ran, and the idle window counts from the last of them.
    model_server.responder = lambda record: Text("re: " + NOTE.sub("", record.last_user_text).strip())
    clock = FakeClock(T0)
    running = await start_gateway({"sessions": {"reset": "idle", "idle_minutes": 60}}, clock=clock)

    async def ask(text: str, at: float, replies: int) -> list[SessionRecord]:
        clock.now = at
        await running.adapter.inject(text)
        await running.adapter.wait_sent(replies)
        await settled(running.store)
        return sorted(await running.store.list_sessions(), key=lambda s: s.started_at)

    (first,) = await ask("my number is 42", T0, 1)
    (same,) = await ask("what is my number?", T0 + HOUR - 1, 2)  # one second inside the window
    assert same.id == first.id and same.is_open
    assert "my number is 42" in str(answering(model_server, "what is my number?").messages)
    ended, new = await ask("and now?", T0 + HOUR - 1 + HOUR, 3)  # exactly a window after the last message
    assert ended.id == first.id and ended.end_reason == "idle" and ended.ended_at == T0 + 2 * HOUR - 1
    assert new.is_open and new.started_at == T0 + 2 * HOUR - 1
    request = answering(model_server, "and now?")
    assert "my number is 42" not in str(request.messages) and IDLE_NOTE in str(request.messages)


def last_rollover(hour: int) -> float:
    """The most recent local ``hour``:00 before now."""
    now = dt.datetime.now().astimezone()
    boundary = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    return (boundary - dt.timedelta(days=1) if boundary > now else boundary).timestamp()


async def test_daily_a_short_silence_across_the_hour_starts_a_new_session(
    start_gateway_with_store_clock: StartWithClock, model_server: ModelServer
) -> None:
    hour = dt.datetime.now().astimezone().hour  # the rollover was less than an hour ago
    running, clock = await start_gateway_with_store_clock({"sessions": {"reset": "daily", "daily_hour": hour}})
    old = await first_turn_at(running, clock, model_server, last_rollover(hour) - 60)
    sessions, request = await second_turn(running, model_server)
    assert len(sessions) == 2
    ended, new = sessions
    assert ended.id == old.id and ended.end_reason == "daily"
    assert new.is_open and new.id != old.id
    assert "my number is 42" not in str(request.messages) and DAILY_NOTE in str(request.messages)


async def test_daily_a_long_silence_not_crossing_the_hour_continues_the_session(
    start_gateway_with_store_clock: StartWithClock, model_server: ModelServer
) -> None:
    # The last rollover was about 12 hours ago, the next is as far off.
    hour = (dt.datetime.now().astimezone().hour + 12) % 24
    # idle_minutes is far shorter than the silence: under "daily" it does not apply.
    overrides = {"sessions": {"reset": "daily", "daily_hour": hour, "idle_minutes": 1}}
    running, clock = await start_gateway_with_store_clock(overrides)
    old = await first_turn_at(running, clock, model_server, last_rollover(hour) + 60)
    sessions, request = await second_turn(running, model_server)
    (same,) = sessions
    assert same.id == old.id and same.is_open and same.end_reason is None
    assert "my number is 42" in str(request.messages) and DAILY_NOTE not in str(request.messages)


async def test_none_a_month_of_silence_keeps_the_session(
    start_gateway_with_store_clock: StartWithClock, model_server: ModelServer
) -> None:
    overrides = {"sessions": {"reset": "none", "idle_minutes": 1, "daily_hour": 0}}
    running, clock = await start_gateway_with_store_clock(overrides)
    old = await first_turn_at(running, clock, model_server, time.time() - 30 * 24 * HOUR)
    sessions, request = await second_turn(running, model_server)
    (same,) = sessions
    assert same.id == old.id and same.is_open and same.end_reason is None
    assert "my number is 42" in str(request.messages)
    assert IDLE_NOTE not in str(request.messages) and DAILY_NOTE not in str(request.messages)


# --- the exact boundaries, on Conversations with one fake clock for it and the store ---------------


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


KEY = SessionKey(platform="loopback", chat_type=ChatType.DM, chat_id="c1", user_id="u1")


def local(day: int, hour: int, minute: int = 0, second: int = 0) -> float:
    """A local time in June 2030 (no daylight-saving change anywhere near)."""
    return dt.datetime(2030, 6, day, hour, minute, second).astimezone().timestamp()


T0 = local(11, 9, 30)  # a morning
MakeConversations = Callable[[SessionsConfig], Awaitable[tuple[Conversations, Store, FakeClock]]]


@pytest_asyncio.fixture
async def conversations_at(model_server: ModelServer, tmp_path: Path) -> AsyncIterator[MakeConversations]:
    """Conversations on the real store and agent, both on one :class:`FakeClock` starting at T0."""
    stores: list[Store] = []

    async def make(settings: SessionsConfig) -> tuple[Conversations, Store, FakeClock]:
        home = tmp_path / "home"
        loaded = load_config(write_config(home, model_server), {"SWITCHBOARD_HOME": str(home)}, create_home=True)
        clock = FakeClock(T0)
        store = await Store.open(loaded.db_path, clock=clock)
        stores.append(store)
        agent = build_agent(loaded, search=search_function(store))
        return Conversations(store, agent, settings, clock=clock), store, clock

    yield make
    for store in stores:
        await store.close()


async def one_exchange(conversations: Conversations, store: Store, clock: FakeClock, at: float) -> SessionRecord:
    """A new session of KEY started at T0, with a question and its answer stored at ``at``."""
    record = (await conversations.open(KEY)).record
    assert record.started_at == T0
    clock.now = at
    await store.append_messages(record.id, [NewMessage("user", "hi"), NewMessage("assistant", "hello")])
    return record


async def test_idle_ends_the_session_at_exactly_idle_minutes_after_its_last_message(
    conversations_at: MakeConversations,
) -> None:
    conversations, store, clock = await conversations_at(SessionsConfig(reset="idle", idle_minutes=90))
    last = T0 + 2 * HOUR  # the session is older than the window; its last message is not
    first = await one_exchange(conversations, store, clock, last)
    clock.now = last + 90 * 60 - 1  # one second short: the same session, its history intact
    inside = await conversations.open(KEY)
    assert inside.record.id == first.id and inside.reset_reason is None and len(inside.records) == 2
    clock.now = last + 90 * 60  # opening the session added no message: the silence still counts from ``last``
    after = await conversations.open(KEY)
    ended = await store.get_session(first.id)
    assert ended is not None and ended.end_reason == "idle" and ended.ended_at == clock.now
    assert after.record.id != first.id and after.reset_reason == "idle" and after.records == []


async def test_daily_ends_the_session_at_the_configured_local_hour(
    conversations_at: MakeConversations,
) -> None:
    rollover = local(12, 10)  # the day after T0
    conversations, store, clock = await conversations_at(SessionsConfig(reset="daily", daily_hour=10))
    # Started before the rollover on the 11th, last spoken to just after it.
    first = await one_exchange(conversations, store, clock, local(11, 10, 0, 1))
    clock.now = rollover - 1
    before = await conversations.open(KEY)
    assert before.record.id == first.id and before.reset_reason is None
    clock.now = rollover
    after = await conversations.open(KEY)
    ended = await store.get_session(first.id)
    assert ended is not None and ended.end_reason == "daily" and ended.ended_at == rollover
    assert after.record.id != first.id and after.reset_reason == "daily" and after.records == []
    # The new session, used again the next day just before 10:00, is not rolled over a second time.
    await store.append_messages(after.record.id, [NewMessage("user", "morning")])
    clock.now = local(13, 9, 59, 59)
    assert (await conversations.open(KEY)).record.id == after.record.id
