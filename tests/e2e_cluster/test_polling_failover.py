"""Three real gateways on one PostgreSQL, Telegram in polling mode: one replica holds the poller's lease, and
when it is SIGKILLed in the middle of the load another takes the lease over and goes on from the offset
the dead one recorded. Every message is answered once, in order per chat; the time the lease took to move
(from the kill to the new owner's first getUpdates) is measured and printed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e_cluster.conversations import Load, echo
from tests.e2e_cluster.replicas import QUICK_TIMINGS, Cluster, polling_now, stopped_with
from tests.e2e_cluster.scenario import HANG_GUARD, harm_under_load
from tests.e2e_cluster.settled import check_settled
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # three real gateways, 300 messages, a lease's expiry

LOOSE = 4
"""The lease must move within its expiry plus a scan; on this shared machine the check allows LOOSE times that
(still under the default expiry alone), so that only a lease that waits for something else fails it."""


async def test_the_poller_lease_moves_when_its_owner_is_killed_and_nothing_is_lost_or_repeated(
    tmp_path: Path, telegram_api: TelegramAPI, model_server: ModelServer, postgres_dsn: str
) -> None:
    echo(model_server)
    model_server.latency = 0.05  # think time: messages queue behind running turns and are answered together
    load = Load(chats=30, per_chat=10)
    cluster = Cluster(tmp_path, telegram_api, model_server, postgres_dsn, mode="polling")

    async def kill_the_poller_owner() -> tuple[str, str, float]:
        """Kill the lease's holder; who held it, who holds it next, and seconds to the next getUpdates."""
        owner = await eventually(cluster.poller, "a replica holding the poller's lease", timeout=HANG_GUARD)
        killed_at = time.monotonic()  # the emulator stamps its calls with this clock
        await cluster.named(owner).kill()
        polls = await eventually(lambda: polling_now(telegram_api, killed_at), "a getUpdates after the kill",
                                 timeout=HANG_GUARD)  # fmt: skip
        new_owner = await eventually(cluster.poller, "a new holder of the poller's lease", timeout=HANG_GUARD)
        return owner, new_owner, polls[0] - killed_at

    (owner, new_owner, moved_s), answered_at_kill, codes = await harm_under_load(cluster, load, kill_the_poller_owner)

    expiry = QUICK_TIMINGS["expire_after"] + QUICK_TIMINGS["scan_every"]
    print(f"\npolling failover: killed {owner}, the poller's owner, at {answered_at_kill}/{load.total} answered; "
          f"{new_owner} polled {moved_s:.2f} s after the kill (expiry + scan: {expiry:g} s); "
          f"replies {len(telegram_api.sent)}")  # fmt: skip
    assert stopped_with(cluster.named(owner).process) and new_owner != owner
    assert moved_s < LOOSE * expiry, f"the lease took {moved_s:.1f} s to move (expiry + scan: {expiry:g} s)"
    assert all(code == 0 for name, code in codes.items() if name != owner), codes
    conflicts = {r.name: r.log_lines("telegram.polling.conflict") for r in cluster.replicas}
    assert not any(conflicts.values()), f"two replicas polled at once: {conflicts}"
    again = await check_settled(postgres_dsn, load, telegram_api, killed=cluster.named(owner))
    print(f"sent again after the kill (accepted from {owner} before it could mark them sent): {again}")
