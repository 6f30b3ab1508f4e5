"""Three real gateways on one PostgreSQL, Telegram webhooks through a round-robin balancer, one replica
SIGKILLed in the middle of a turn: every message is answered once, in order per chat.

The Telegram emulator delivers each update to the balancer, which hands consecutive updates to different
replicas, so one chat's messages are stored by all three and only the session claim keeps its turns one at
a time and in order. 300 messages over 30 chats; once a third are answered, the model holds every answer
until a turn is waiting for it, and the replica running that turn is killed (its claims, and the outbox
chunks it held, move to the others once it expires). The balancer skips the dead replica; an update it
had taken without answering is delivered again by the emulator, to another replica.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.e2e_cluster.conversations import Load, echo, tally
from tests.e2e_cluster.replicas import Cluster, stopped_with
from tests.e2e_cluster.settled import check_settled
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # three real gateways, 300 messages, a replica's expiry

CHATS, PER_CHAT = 30, 10
KILL_AFTER = 100
"""Messages answered before the replica is killed (a third of the load)."""
HANG_GUARD = 180.0


async def test_a_replica_killed_mid_turn_behind_a_webhook_balancer_loses_and_repeats_nothing(
    tmp_path: Path, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    echo(model_server)
    model_server.latency = 0.05  # think time: messages queue behind running turns and are answered together
    load = Load(CHATS, PER_CHAT)
    cluster = Cluster(tmp_path, telegram_api, model_server, postgres_dsn, mode="webhook")
    feeder: asyncio.Task[None] | None = None
    try:
        await cluster.start()
        feeder = asyncio.create_task(load.feed(telegram_api))
        await eventually(lambda: load.answered(telegram_api) >= KILL_AFTER, "the first third answered",
                         timeout=HANG_GUARD)  # fmt: skip

        # Hold the model's answers until a turn waits for one; kill the replica running it; let answers go.
        model_server.gate, asked_before = asyncio.Event(), len(model_server.requests)
        waiting = await eventually(
            lambda: [r for r in model_server.requests[asked_before:] if r.path == "/v1/messages" and r.status is None],
            "a turn waiting for the model", timeout=HANG_GUARD,
        )  # fmt: skip
        victim = cluster.asker(waiting[0])
        answered_at_kill = load.answered(telegram_api)
        await victim.kill()
        model_server.gate.set()
        model_server.gate = None

        await feeder
        await eventually(lambda: load.all_answered(telegram_api), "a reply naming every message", timeout=HANG_GUARD)
        for replica in cluster.running():
            assert replica.running, cluster.failed(replica)
    finally:
        if feeder is not None:
            feeder.cancel()
        codes = await cluster.stop()

    assert stopped_with(victim.process) and answered_at_kill < load.total, "the kill did not land mid-load"
    assert all(code == 0 for name, code in codes.items() if name != victim.name), codes
    result = tally(load, telegram_api)
    assert (result.lost, result.duplicated, result.out_of_order, result.misdirected) == ([], [], {}, [])
    await check_settled(postgres_dsn, load, telegram_api)
    balancer = cluster.balancer
    assert balancer is not None
    print(f"\nwebhook failover: killed {victim.name} mid-turn at {answered_at_kill}/{load.total} answered; "
          f"replies {len(telegram_api.sent)}; updates forwarded {dict(balancer.forwarded)}, refused "
          f"{dict(balancer.refused)}, dropped {balancer.dropped}")  # fmt: skip
