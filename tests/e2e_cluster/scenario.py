"""The scenario both cluster end-to-end tests run: start the replicas, let the people write, do the test's harm
once a third of the messages are answered, wait for a reply naming every message, and stop the replicas."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.e2e_cluster.conversations import Load, Tally, tally
from tests.e2e_cluster.replicas import Cluster
from tests.waiting import eventually

T = TypeVar("T")
HANG_GUARD = 180.0


async def harm_under_load(
    cluster: Cluster, load: Load, harm: Callable[[], Awaitable[T]]
) -> tuple[T, int, dict[str, int]]:
    """What ``harm()`` returned, how many messages were answered when it began, and each replica's exit status."""
    telegram = cluster.telegram
    feeder: asyncio.Task[None] | None = None
    try:
        await cluster.start()
        feeder = asyncio.create_task(load.feed(telegram))
        await eventually(lambda: load.answered(telegram) >= load.total // 3, "the first third answered",
                         timeout=HANG_GUARD)  # fmt: skip
        answered_at_harm = load.answered(telegram)
        done = await harm()
        await feeder
        try:
            await eventually(lambda: load.all_answered(telegram), "a reply naming every message", timeout=HANG_GUARD)
        except AssertionError as failure:
            raise AssertionError(f"{failure}; so far {shortly(tally(load, telegram))}") from None
        for replica in cluster.running():
            assert replica.running, cluster.failed(replica)
    finally:
        if feeder is not None:
            feeder.cancel()
        codes = await cluster.stop()
    assert answered_at_harm < load.total, "the harm did not come in the middle of the load"
    return done, answered_at_harm, codes


def shortly(counted: Tally) -> str:
    return (f"{len(counted.lost)} lost ({', '.join(counted.lost[:10])}...), {len(counted.duplicated)} duplicated "
            f"({', '.join(counted.duplicated[:10])}), {len(counted.out_of_order)} chats out of order, "
            f"{len(counted.misdirected)} replies misdirected")  # fmt: skip
