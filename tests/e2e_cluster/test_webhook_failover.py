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

from tests.e2e_cluster.conversations import Load, echo
from tests.e2e_cluster.replicas import Cluster, ReplicaProcess, stopped_with
from tests.e2e_cluster.scenario import HANG_GUARD, harm_under_load
from tests.e2e_cluster.settled import check_settled
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # three real gateways, 300 messages, a replica's expiry


async def test_a_replica_killed_mid_turn_behind_a_webhook_balancer_loses_and_repeats_nothing(
    tmp_path: Path, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    echo(model_server)
    model_server.latency = 0.05  # think time: messages queue behind running turns and are answered together
    load = Load(chats=30, per_chat=10)
    cluster = Cluster(tmp_path, telegram_api, model_server, postgres_dsn, mode="webhook")

    async def kill_mid_turn() -> ReplicaProcess:
        """Hold the model's answers until a turn waits for one, kill the replica running it, let answers go."""
        model_server.gate, asked_before = asyncio.Event(), len(model_server.requests)
        waiting = await eventually(
            lambda: [r for r in model_server.requests[asked_before:] if r.path == "/v1/messages" and r.status is None],
            "a turn waiting for the model", timeout=HANG_GUARD,
        )  # fmt: skip
        victim = cluster.asker(waiting[0])
        await victim.kill()
        model_server.gate.set()
        model_server.gate = None
        return victim

    victim, answered_at_kill, codes = await harm_under_load(cluster, load, kill_mid_turn)

    balancer = cluster.balancer
    assert balancer is not None
    print(f"\nwebhook failover: killed {victim.name} mid-turn at {answered_at_kill}/{load.total} answered; "
          f"replies {len(telegram_api.sent)}; updates forwarded {dict(balancer.forwarded)}, refused "
          f"{dict(balancer.refused)}, dropped {balancer.dropped}")  # fmt: skip
    assert stopped_with(victim.process)
    assert len(balancer.forwarded) == 3, "every replica took updates"
    assert all(code == 0 for name, code in codes.items() if name != victim.name), codes
    again = await check_settled(postgres_dsn, load, telegram_api, killed=victim)
    print(f"sent again after the kill (accepted from {victim.name} before it could mark them sent): {again}")
