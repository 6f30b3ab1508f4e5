"""Cluster mode, one conversation across replicas: two real gateways on one PostgreSQL database, each with the real
Telegram adapter (aiogram) in webhook mode, so the test chooses which replica receives each update (as a load
balancer would). Whichever receives it, a session's messages are routed and run by the replica holding its claim:
one turn at a time in the whole cluster, in arrival order; ``/stop`` sent to one replica stops the turn running on
the other; and a conversation whose replica died is taken over by another one's scan."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest_asyncio

from adapters.contract import InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from config import load_config
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from gateway.runner import search_function
from gateway.store_setup import open_configured_store
from storage import PostgresStore
from tests.adapters.telegram.test_webhook import SECRET, free_port, webhook_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.model_server.records import RequestRecord
from tests.fakes.telegram_api import Failure, TelegramAPI, User
from tests.gateway.conftest import write_config
from tests.waiting import eventually

ALICE = User(id=1001, first_name="Alice", username="alice")
FAST_CLUSTER = {"enabled": True, "heartbeat_every": 0.2, "expire_after": 1.0, "scan_every": 0.1}
"""Short timings, so a replica that stops beating is found dead within a second or two."""
WORD = re.compile(r"msg-\d+")


@dataclass
class Replica:
    """One gateway of the cluster and where its Telegram webhook listens."""

    gateway: Gateway
    url: str

    async def receive(self, api: TelegramAPI, update_id: int, text: str) -> None:
        """Telegram posts ``text`` from Alice to this replica's webhook (it answers 200 once the event is stored)."""
        update = {"update_id": update_id, "message": api.message(ALICE, text)}
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with aiohttp.ClientSession() as session, session.post(self.url, json=update, headers=headers) as answer:
            assert answer.status == 200


StartReplica = Callable[..., Any]


@pytest_asyncio.fixture
async def start_replica(
    tmp_path: Path, postgres_dsn: str, telegram_api: TelegramAPI, model_server: ModelServer
) -> AsyncIterator[StartReplica]:
    """Start replicas on demand, all on one database, each with a home of its own; all shut down at the end."""
    async with AsyncExitStack() as stack:

        async def start(name: str, *, model: ModelServer = model_server, **sections: dict[str, Any]) -> Replica:
            home = tmp_path / name
            port = free_port()
            path = write_config(home, model, {
                "storage": {"url": postgres_dsn},
                "cluster": {**FAST_CLUSTER, "replica_id": name},
                "platforms": {"telegram": {"token": telegram_api.token, "api_base_url": telegram_api.base_url,
                                           "allowed_users": [str(ALICE.id)], **webhook_config(port)},
                              "slack": {"enabled": False}, "discord": {"enabled": False}},
                **sections,
            })  # fmt: skip
            loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
            store = await open_configured_store(loaded)
            gateway = Gateway(loaded, store, load_adapters(build_plan(loaded).enabled, loaded),
                              build_agent(loaded, search=search_function(store)))  # fmt: skip
            await gateway.start()
            stack.push_async_callback(gateway.shutdown)
            return Replica(gateway, f"http://127.0.0.1:{port}/telegram-hook")

        yield start


async def die(replica: Replica) -> None:
    """The replica's process is killed, as far as the cluster can tell: it stops beating, scanning and listening, and
    never leaves (its gateway object stays, as a process frozen for good would: its turn may still try to answer)."""
    cluster = replica.gateway.replica
    assert cluster is not None
    await cluster.halt()


def answer_naming_the_message(record: RequestRecord) -> Text:
    words = WORD.findall(record.last_user_text)
    return Text(f"reply to {words[-1] if words else 'nothing'}")


def replies(api: TelegramAPI) -> list[str]:
    return [message.visible for message in api.sent_to(ALICE.id)]


def turn_requests(server: ModelServer) -> list[RequestRecord]:
    return [record for record in server.requests if WORD.search(record.last_user_text)]


async def test_messages_of_one_chat_sent_to_two_replicas_run_one_turn_at_a_time_in_order(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = answer_naming_the_message
    model_server.latency = 0.4  # each turn is still running when the next message reaches the other replica
    a, b = await start_replica("a"), await start_replica("b")

    count = 6
    for n in range(1, count + 1):
        await (a if n % 2 else b).receive(telegram_api, n, f"msg-{n}")
        # The next message comes while this one's turn runs (its model call is under way).
        await eventually(lambda n=n: len(turn_requests(model_server)) >= n, f"the turn of msg-{n} to ask the model")

    expected = [f"reply to msg-{n}" for n in range(1, count + 1)]
    await eventually(lambda: len(replies(telegram_api)) >= count, "a reply to every message")
    assert replies(telegram_api) == expected
    # One turn at a time, in order: each turn's model call already saw the previous turn's answer.
    requests = turn_requests(model_server)
    assert [WORD.findall(r.last_user_text)[-1] for r in requests] == [f"msg-{n}" for n in range(1, count + 1)]
    for n, record in enumerate(requests[1:], start=2):
        assert f"reply to msg-{n - 1}" in json.dumps(record.messages), f"the turn of msg-{n} overlapped the one before"


async def test_commands_sent_to_one_replica_act_on_the_turn_running_on_the_other(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = answer_naming_the_message
    model_server.gate = asyncio.Event()  # the model answers nothing until the test lets it
    a, b = await start_replica("a"), await start_replica("b")

    async def command(update_id: int, text: str) -> str:
        before = len(replies(telegram_api))
        await b.receive(telegram_api, update_id, text)
        await eventually(lambda: len(replies(telegram_api)) > before, f"an answer to {text}")
        return replies(telegram_api)[-1]

    await a.receive(telegram_api, 1, "msg-1 a long question")
    await eventually(lambda: turn_requests(model_server), "the turn of msg-1 to ask the model, on replica a")
    assert "Now: answering now" in await command(2, "/status")
    assert await command(3, "/compress") == "I'm in the middle of a reply; send /compress again when it's done."
    assert await command(4, "/stop") == (
        "Stopped. Anything I had already said or saved stays; send a new message when you're ready."
    )
    await a.receive(telegram_api, 5, "msg-5")
    await eventually(lambda: len(turn_requests(model_server)) == 2, "the turn of msg-5 to ask the model, on replica a")
    assert await command(6, "/new") == "Started a new conversation; I've set the earlier one aside. What's next?"

    await eventually(lambda: not any(r.gateway.lanes.running() for r in (a, b)), "no turn left running")
    model_server.gate.set()  # the stopped turns' answers would come now, were they still running
    await a.receive(telegram_api, 7, "msg-7")
    await eventually(lambda: len(replies(telegram_api)) >= 5, "the reply to msg-7")
    assert replies(telegram_api)[4:] == ["reply to msg-7"]
    assert [WORD.findall(r.last_user_text)[-1] for r in turn_requests(model_server)] == ["msg-1", "msg-5", "msg-7"]


async def test_messages_sent_to_two_replicas_within_the_debounce_window_make_one_turn(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = answer_naming_the_message
    sessions = {"debounce_ms": 2000}
    a, b = await start_replica("a", sessions=sessions), await start_replica("b", sessions=sessions)

    await a.receive(telegram_api, 1, "msg-1")
    await b.receive(telegram_api, 2, "msg-2")

    await eventually(lambda: replies(telegram_api), "the reply")
    await eventually(lambda: not any(r.gateway.lanes.running() or r.gateway.lanes.queued() for r in (a, b)), "quiet")
    assert replies(telegram_api) == ["reply to msg-2"]
    [request] = turn_requests(model_server)
    assert WORD.findall(json.dumps(request.messages)) == ["msg-1", "msg-2"]


async def test_a_message_sent_to_another_replica_interrupts_the_running_turn_with_busy_interrupt(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = answer_naming_the_message
    model_server.gate = asyncio.Event()
    sessions = {"busy": "interrupt"}
    a, b = await start_replica("a", sessions=sessions), await start_replica("b", sessions=sessions)

    await a.receive(telegram_api, 1, "msg-1")
    await eventually(lambda: turn_requests(model_server), "the turn of msg-1 to ask the model")
    await b.receive(telegram_api, 2, "msg-2")
    await eventually(lambda: len(turn_requests(model_server)) >= 2, "the turn of both to ask the model")
    model_server.gate.set()

    await eventually(lambda: replies(telegram_api), "the reply")
    await eventually(lambda: not any(r.gateway.lanes.running() for r in (a, b)), "no turn left running")
    assert replies(telegram_api) == ["reply to msg-2"]
    first, second = turn_requests(model_server)
    assert WORD.findall(json.dumps(second.messages)) == ["msg-1", "msg-2"]  # one turn with both, the first stopped


async def test_the_conversation_of_a_replica_that_died_mid_turn_is_taken_over_by_the_scan(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    stuck = ModelServer()  # the replica that dies asks a model that never answers while it lives
    await stuck.start()
    try:
        stuck.gate = asyncio.Event()
        model_server.responder = answer_naming_the_message
        a = await start_replica("a", model=stuck)
        b = await start_replica("b")

        await a.receive(telegram_api, 1, "msg-1")
        await eventually(lambda: turn_requests(stuck), "the turn to ask the model, on replica a")
        await die(a)

        await eventually(lambda: replies(telegram_api), "replica b to answer the message", timeout=30)
        assert replies(telegram_api) == ["reply to msg-1"]
        assert b.gateway.metrics.cluster_claim_expiries.totals.get((), 0) == 1
        assert sum(b.gateway.metrics.cluster_claim_waits.counts) == 1  # msg-1 waited for the dead replica's claim

        stuck.gate.set()  # the dead replica's turn gets its answer now: it may not store or send it
        await eventually(lambda: not a.gateway.lanes.running(), "the dead replica's turn to end")
        await b.receive(telegram_api, 2, "msg-2")
        await eventually(lambda: len(replies(telegram_api)) >= 2, "the reply to msg-2")
        assert replies(telegram_api) == ["reply to msg-1", "reply to msg-2"]
    finally:
        await stuck.stop()


async def test_a_replica_whose_incarnation_expired_stops_its_turns_and_the_conversation_goes_on_once(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    model_server.responder = answer_naming_the_message
    model_server.gate = asyncio.Event()
    a, b = await start_replica("a"), await start_replica("b")
    assert a.gateway.replica is not None
    await a.receive(telegram_api, 1, "msg-1")
    await eventually(lambda: turn_requests(model_server), "the turn to ask the model, on replica a")

    expired = a.gateway.replica.id
    conn = await asyncpg.connect(postgres_dsn)
    try:  # as if replica a had been frozen past its expiry: the cluster counts it dead
        await conn.execute("UPDATE replicas SET expires_at = now() - interval '1 minute' WHERE id = $1", expired)
    finally:
        await conn.close()
    await eventually(lambda: a.gateway.replica.id != expired, "replica a to join again under a new incarnation")
    await eventually(lambda: len(turn_requests(model_server)) >= 2, "the message's turn to run again")
    model_server.gate.set()

    await eventually(lambda: replies(telegram_api), "the reply")
    await eventually(lambda: not any(r.gateway.lanes.running() for r in (a, b)), "no turn left running")
    assert replies(telegram_api) == ["reply to msg-1"]
    # The expired incarnation's turn stopped: only one turn stored the message and its answer.
    conn = await asyncpg.connect(postgres_dsn)
    try:
        stored = await conn.fetch("SELECT role, content FROM messages WHERE role IN ('user', 'assistant') ORDER BY id")
    finally:
        await conn.close()
    assert [(row["role"], WORD.findall(row["content"])) for row in stored] == [
        ("user", ["msg-1"]), ("assistant", ["msg-1"])
    ]


NO_SCANS = {"cluster": {**FAST_CLUSTER, "scan_every": 60.0}}
"""No scan in the test's time: whatever a replica does comes from a message it records or is signalled."""


async def mark_expired(replica: Replica, dsn: str) -> None:
    """The cluster counts ``replica`` dead now (it stopped beating: see :func:`die`)."""
    assert replica.gateway.replica is not None
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE replicas SET expires_at = now() - interval '1 second' WHERE id = $1",
                           replica.gateway.replica.id)  # fmt: skip
    finally:
        await conn.close()


async def test_a_dead_replicas_unsent_reply_goes_out_before_the_reply_of_the_next_turn_on_another_replica(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    """Replica a ends the turn of msg-1 (its reply is recorded, claimed by a) and dies before the platform takes the
    reply. Replica b gets msg-2, reaps a as it claims the session, and runs msg-2's turn: a's reply goes first."""
    model_server.responder = answer_naming_the_message
    a, b = await start_replica("a", **NO_SCANS), await start_replica("b", **NO_SCANS)
    telegram_api.fail("sendMessage", Failure.too_many_requests(3600))  # a's send is put off for later
    await a.receive(telegram_api, 1, "msg-1")
    await eventually(lambda: send_answered(telegram_api) and not a.gateway.lanes.running(), "a's turn to end unsent")
    await die(a)
    await mark_expired(a, postgres_dsn)

    await b.receive(telegram_api, 2, "msg-2")
    await eventually(lambda: "reply to msg-2" in replies(telegram_api), "the reply to msg-2")
    assert replies(telegram_api) == ["reply to msg-1", "reply to msg-2"]
    await eventually(lambda: not b.gateway.lanes.running(), "b's turn to end")
    assert replies(telegram_api) == ["reply to msg-1", "reply to msg-2"], "each once"


async def test_a_live_replica_with_a_reply_put_off_keeps_the_session_and_the_next_reply_waits_behind_it(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    """The platform put off replica a's reply to msg-1 (a long rate limit): a does not let the session go while its
    lane is idle, so msg-2, sent to b, runs on a and its reply waits behind msg-1's (a's scans try msg-1's again,
    after the platform's wait). Once a dies, b sends both, in order."""
    model_server.responder = answer_naming_the_message
    a, b = await start_replica("a"), await start_replica("b")
    assert a.gateway.replica is not None
    scans: list[None] = []
    telegram_api.fail("sendMessage", Failure.too_many_requests(3600))
    await a.receive(telegram_api, 1, "msg-1")
    await eventually(lambda: send_answered(telegram_api) and not a.gateway.lanes.running(), "a's turn to end unsent")
    a.gateway.replica.on_scan(lambda: count(scans))
    await eventually(lambda: len(scans) >= 3, "a few scans of a with its lane idle")

    await b.receive(telegram_api, 2, "msg-2")
    await eventually(lambda: len(turn_requests(model_server)) >= 2, "msg-2's turn to ask the model")
    await eventually(lambda: turn_ended(postgres_dsn, 2, a, b), "msg-2's turn to end (its reply sent or queued)")
    assert replies(telegram_api) == [], "msg-2's reply waits behind msg-1's"
    assert [WORD.findall(r.last_user_text)[-1] for r in turn_requests(model_server)] == ["msg-1", "msg-2"]

    await die(a)  # what a held goes to b, the chat's chunks in order
    await eventually(lambda: len(replies(telegram_api)) >= 2, "b to send both replies", timeout=30)
    assert replies(telegram_api) == ["reply to msg-1", "reply to msg-2"]


async def turn_ended(dsn: str, answered: int, *replicas: Replica) -> bool:
    """``answered`` messages are done (their replies recorded) and no turn runs (none is still sending its reply)."""
    conn = await asyncpg.connect(dsn)
    try:
        done = await conn.fetchval("SELECT count(*) FROM inbox WHERE status = 'done'")
    finally:
        await conn.close()
    return done == answered and not any(replica.gateway.lanes.running() for replica in replicas)


def send_answered(api: TelegramAPI) -> bool:
    return any(call.method == "sendMessage" for call in api.answered)


async def count(scans: list[None]) -> None:
    scans.append(None)


async def test_a_replica_that_takes_a_session_routes_nothing_while_another_sends_the_chats_older_replies(
    start_replica: StartReplica, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    """Replica a dies with its reply to msg-1 unsent; replica c reaps it and takes the chunk (its scan came first),
    but is slow to send it. Replica b, taking the session for msg-2, runs msg-2's turn only once c sent msg-1's."""
    model_server.responder = answer_naming_the_message
    a = await start_replica("a", **NO_SCANS)
    telegram_api.fail("sendMessage", Failure.too_many_requests(3600))
    await a.receive(telegram_api, 1, "msg-1")
    await eventually(lambda: send_answered(telegram_api) and not a.gateway.lanes.running(), "a's turn to end unsent")
    await die(a)
    await mark_expired(a, postgres_dsn)

    async with AsyncExitStack() as stack:
        c = await PostgresStore.open(postgres_dsn)  # replica c: only what its scan's pickup does
        stack.push_async_callback(c.close)
        await c.cluster.join("c", host="test", pid=0, version="t", expire_after=60.0)
        assert await c.cluster.reap()
        assert [row.text for row in await c.outbox_pending()] == ["reply to msg-1"]  # c took the chunk over

        b = await start_replica("b")
        assert b.gateway.replica is not None
        scans: list[None] = []
        b.gateway.replica.on_scan(lambda: count(scans))
        await b.receive(telegram_api, 2, "msg-2")
        await eventually(lambda: len(scans) >= 3, "a few scans of b")
        assert replies(telegram_api) == [] and len(turn_requests(model_server)) == 1, "msg-2 waits for msg-1's reply"

        adapter = TelegramAdapter(TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url))
        stack.push_async_callback(adapter.close)
        await adapter.start(no_intake, receive=False)
        assert await Delivery(c, {"telegram": adapter}, Metrics()).resume() == 1  # c sends it at last
        await eventually(lambda: len(replies(telegram_api)) >= 2, "the reply to msg-2")
        assert replies(telegram_api) == ["reply to msg-1", "reply to msg-2"]


async def no_intake(message: InboundMessage) -> None:
    return None
