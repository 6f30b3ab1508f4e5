"""Outbox chunks across replicas, through the real path: two stores on one PostgreSQL as two replicas, each with its own
``Delivery`` and a real Telegram adapter (aiogram) against the Telegram emulator. A replica's chunks are sent by it
alone; once it dies and is reaped, another replica's scan picks them up and sends each once; a replica frozen past its
expiry sends nothing when it wakes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest_asyncio

from adapters.contract import InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from config.cluster import ClusterConfig
from gateway.cluster.outbox_claims import pick_up_left_chunks
from gateway.cluster.replica import Replica
from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from gateway.tasks import TaskTracker
from storage import OutboxChunk, PostgresStore, TurnEnd
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.builders import Chat, User
from tests.gateway.cluster.test_replica import Frozen
from tests.storage.postgres.test_cluster import expire
from tests.waiting import eventually

FAST = ClusterConfig(enabled=True, heartbeat_every=0.2, expire_after=1.0, scan_every=0.2)
SLOW_BEATS = ClusterConfig(enabled=True, heartbeat_every=5.0, expire_after=15.0, scan_every=5.0)
"""A replica whose heartbeat task sleeps long enough that a test freezes it in between."""
CAROL = User(id=3003, first_name="Carol")


async def no_intake(message: InboundMessage) -> None:
    return None


@dataclass
class Gateway:
    """One replica's delivery side: its store, incarnation, Telegram adapter and delivery."""

    store: PostgresStore
    replica: Replica
    adapter: TelegramAdapter
    delivery: Delivery


@pytest_asyncio.fixture
async def replicas(postgres_dsn: str, telegram_api: TelegramAPI) -> AsyncIterator[list[Gateway]]:
    telegram_api.add_chat(Chat.private(CAROL))
    closing: list[Callable[[], Awaitable[None]]] = []

    async def make(name: str, settings: ClusterConfig, clock: Frozen | None = None) -> Gateway:
        store = await PostgresStore.open(postgres_dsn)
        closing.append(store.close)
        adapter = TelegramAdapter(TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url))
        closing.append(adapter.close)
        replica = Replica(store.cluster, settings.model_copy(update={"replica_id": name}), Metrics(), version="t",
                          **({"monotonic": clock} if clock else {}))  # fmt: skip
        delivery = Delivery(store, {"telegram": adapter}, Metrics(), may_send=replica.alive)
        tasks = TaskTracker()
        closing.append(lambda: tasks.drain(5))
        closing.append(replica.stop)
        pick_up_left_chunks(replica, delivery, tasks.spawn)
        await adapter.start(no_intake)
        await replica.start()
        return Gateway(store, replica, adapter, delivery)

    yield make  # type: ignore[misc]
    for close in reversed(closing):  # each replica stops, then its tasks, adapter and store
        await close()


def reply(turn_id: str, texts: list[str]) -> TurnEnd:
    return TurnEnd(turn_id, "telegram", str(CAROL.id), None, [OutboxChunk(text=t) for t in texts])


def shown(telegram_api: TelegramAPI) -> list[str]:
    return [m.text for m in telegram_api.sent_to(CAROL.id)]


async def test_a_dead_replicas_chunks_are_sent_once_by_another_after_it_is_reaped(
    replicas, postgres_dsn: str, telegram_api: TelegramAPI
) -> None:
    a = await replicas("gw-a", SLOW_BEATS)
    b = await replicas("gw-b", FAST)
    scans: list[None] = []
    b.replica.on_scan(lambda: _count(scans))
    await a.store.finish_turn(reply("telegram:1", ["first part", "second part"]))  # then A dies before sending

    await eventually(lambda: len(scans) >= 5, "B scanned a few times")
    assert shown(telegram_api) == [], "A lives: its chunks are not B's to send"

    await expire(a.store, postgres_dsn)  # A stopped beating (killed)
    await telegram_api.wait_sent(2)
    settled = len(scans)
    await eventually(lambda: len(scans) >= settled + 5, "B scanned a few times more")
    assert shown(telegram_api) == ["first part", "second part"], "each chunk once, in order"
    assert await b.store.outbox_pending() == []
    ids = {m.message_id for m in telegram_api.sent_to(CAROL.id)}
    rows = [await b.store.outbox_get(n) for n in (1, 2)]
    assert {int(r.platform_message_id) for r in rows if r and r.status == "sent"} == ids  # type: ignore[arg-type]


async def test_a_replica_frozen_past_its_expiry_sends_nothing_and_another_sends_its_chunks(
    replicas, postgres_dsn: str, telegram_api: TelegramAPI
) -> None:
    clock = Frozen()
    a = await replicas("gw-a", SLOW_BEATS, clock)
    rows = await a.store.finish_turn(reply("telegram:1", ["the answer"]))
    await expire(a.store, postgres_dsn)  # the server gave up on A ...
    clock.skipped = 60.0  # ... while A slept through it; its turn now wakes and delivers
    assert not a.delivery.may_send()
    assert await a.delivery.deliver(rows) == [(rows[0], None)]
    assert shown(telegram_api) == [], "a frozen replica sends nothing once it wakes"

    b = await replicas("gw-b", FAST)  # reaps A, takes the chunk over
    await telegram_api.wait_sent(1)
    assert shown(telegram_api) == ["the answer"]
    await eventually(lambda: a.replica.alive(), "A joined again as a new replica")
    await a.delivery.resume()  # nothing of the old incarnation is A's any more
    assert shown(telegram_api) == ["the answer"] and await b.store.outbox_pending() == []


async def _count(scans: list[None]) -> None:
    scans.append(None)


async def test_a_reply_a_pickup_sent_first_is_not_sent_again_by_its_turn(replicas, telegram_api: TelegramAPI) -> None:
    """A scan's pickup lists the replica's own pending rows too: one may be a reply its turn is about to deliver."""
    a = await replicas("gw-a", SLOW_BEATS)
    rows = await a.store.finish_turn(reply("telegram:1", ["only once"]))
    await a.delivery.resume()  # the pickup came first ...
    [(_, message_id)] = await a.delivery.deliver(rows)  # ... then the turn hands over its rows as queued
    assert shown(telegram_api) == ["only once"]
    assert message_id == str(telegram_api.sent_to(CAROL.id)[0].message_id)
