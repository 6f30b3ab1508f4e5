"""Two gateways share one Discord bot: only the holder of the gateway WebSocket's lease connects and hands over.

The real adapter (discord.py) against the emulator, twice, as two replicas run it: both start for sending
only (a REST login, no WebSocket), and the one the test hands an :class:`~adapters.contract.Ownership`
opens the WebSocket. The gateway's real leases on PostgreSQL are in tests/gateway/test_cluster_connections.py;
here the test holds the ownership's ``held()`` answer.
"""

from __future__ import annotations

from adapters.contract import AdapterState, OutboundMessage, Ownership
from tests.adapters.discord.conftest import ALICE, Collected
from tests.adapters.discord.test_connection import adapter_for
from tests.fakes.discord_api import DiscordEmulator
from tests.waiting import eventually


class Lease:
    def __init__(self, fence: int) -> None:
        self.holds = True
        self.ownership = Ownership(lease="discord:gateway:1", fence=fence, held=lambda: self.holds)


async def test_only_the_holder_opens_the_websocket_and_one_that_no_longer_holds_hands_nothing_over(
    emulator: DiscordEmulator,
) -> None:
    one, two = adapter_for(emulator), adapter_for(emulator)
    first, second = Collected(), Collected()
    gaps: list[str] = []
    two.on_gap = gaps.append
    assert one.receiving_lease() == two.receiving_lease()
    try:
        # Before: start() took no receive argument, and every process opened the bot's gateway WebSocket.
        await one.start(first, receive=False)
        await two.start(second, receive=False)
        assert emulator.gateway is not None and emulator.gateway.identifies == []
        assert one.status().state is AdapterState.RUNNING and "sending only" in one.status().detail
        channel = emulator.world.dm_channel_for(ALICE)
        await two.send(OutboundMessage(chat_id=channel, text="sent without a WebSocket"))  # REST after login only
        await emulator.wait_sent(1)

        old = Lease(fence=1)
        await one.start_receiving(old.ownership)
        await eventually(lambda: one.status().state is AdapterState.RUNNING and len(emulator.gateway.identifies) == 1,
                         "the holder to connect")  # fmt: skip
        await emulator.dm(ALICE, "to the holder")
        await first.wait(1)

        old.holds = False  # its replica expired: whatever arrives now is the next holder's
        await emulator.dm(ALICE, "after it lost the lease")
        await eventually(lambda: "sending only" in one.status().detail, "the old holder to stop receiving")
        assert [m.text for m in first.messages] == ["to the holder"]

        await two.start_receiving(Lease(fence=2).ownership)
        await eventually(lambda: len(emulator.gateway.identifies) == 2, "the new holder to connect")
        await eventually(lambda: gaps, "the new holder's first session reported as a gap (to catch up)")
        await emulator.dm(ALICE, "to the new holder")
        await second.wait(1)
        assert [m.text for m in second.messages] == ["to the new holder"] and len(first.messages) == 1
    finally:
        await one.close()
        await two.close()
