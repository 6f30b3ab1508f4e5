"""Three real gateways on one PostgreSQL, Telegram in polling mode: one replica holds the poller's lease, and
when it is SIGKILLed in the middle of the load another takes the lease over and goes on from the offset
the dead one recorded. Every message is answered once, in order per chat; the time the lease took to move
(from the kill to the new owner's first getUpdates) is measured and printed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.e2e_cluster.conversations import Load, echo, tally
from tests.e2e_cluster.replicas import QUICK_TIMINGS, Cluster, polling_now, stopped_with
from tests.e2e_cluster.settled import check_settled
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # three real gateways, 300 messages, a lease's expiry

CHATS, PER_CHAT = 30, 10
KILL_AFTER = 100
HANG_GUARD = 180.0
LOOSE = 4
"""The lease must move within its expiry plus a scan; on this shared machine the check allows LOOSE times that
(still under the default expiry alone), so that only a lease that waits for something else fails it."""


async def test_the_poller_lease_moves_when_its_owner_is_killed_and_nothing_is_lost_or_repeated(
    tmp_path: Path, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    echo(model_server)
    model_server.latency = 0.05  # think time: messages queue behind running turns and are answered together
    load = Load(CHATS, PER_CHAT)
    cluster = Cluster(tmp_path, telegram_api, model_server, postgres_dsn, mode="polling")
    feeder: asyncio.Task[None] | None = None
    try:
        await cluster.start()
        first_owner = await eventually(cluster.poller, "a replica holding the poller's lease", timeout=HANG_GUARD)
        feeder = asyncio.create_task(load.feed(telegram_api))
        await eventually(lambda: load.answered(telegram_api) >= KILL_AFTER, "the first third answered",
                         timeout=HANG_GUARD)  # fmt: skip

        owner = cluster.named(await eventually(cluster.poller, "the poller's owner", timeout=HANG_GUARD))
        answered_at_kill = load.answered(telegram_api)
        killed_at = time.monotonic()  # the emulator stamps its calls with this clock
        await owner.kill()
        first_poll = (await eventually(lambda: polling_now(telegram_api, killed_at), "a getUpdates after the kill",
                                       timeout=HANG_GUARD))[0]  # fmt: skip
        moved_s = first_poll - killed_at
        new_owner = await eventually(cluster.poller, "a new owner of the poller's lease", timeout=HANG_GUARD)

        await feeder
        await eventually(lambda: load.all_answered(telegram_api), "a reply naming every message", timeout=HANG_GUARD)
        for replica in cluster.running():
            assert replica.running, cluster.failed(replica)
    finally:
        if feeder is not None:
            feeder.cancel()
        codes = await cluster.stop()

    expiry = QUICK_TIMINGS["expire_after"] + QUICK_TIMINGS["scan_every"]
    print(f"\npolling failover: {first_owner} polled first; killed {owner.name} at {answered_at_kill}/{load.total} "
          f"answered; {new_owner} polled {moved_s:.2f} s after the kill (expiry + scan: {expiry:g} s); "
          f"replies {len(telegram_api.sent)}")  # fmt: skip
    assert stopped_with(owner.process) and answered_at_kill < load.total, "the kill did not land mid-load"
    assert new_owner != owner.name
    assert moved_s < LOOSE * expiry, f"the lease took {moved_s:.1f} s to move (expiry + scan: {expiry:g} s)"
    assert all(code == 0 for name, code in codes.items() if name != owner.name), codes
    conflicts = {r.name: r.log_lines("telegram.polling.conflict") for r in cluster.replicas}
    assert not any(conflicts.values()), f"two replicas polled at once: {conflicts}"
    result = tally(load, telegram_api)
    assert (result.lost, result.duplicated, result.out_of_order, result.misdirected) == ([], [], {}, [])
    await check_settled(postgres_dsn, load, telegram_api)
