"""Two gateways share one Slack app in Socket Mode: only the holder of the socket's lease connects and hands over.

The real adapter (slack-bolt) against the fake Slack, twice, as two replicas run it: both start for sending only
(no socket), and the one the test hands an :class:`~adapters.contract.Ownership` opens the socket. An event that
reaches a holder that no longer holds the lease is not acknowledged (Slack delivers it again, to whichever
process holds the socket then). The gateway's real leases on PostgreSQL are in
tests/gateway/test_cluster_connections.py; here the test holds the ownership's ``held()`` answer.
"""

from __future__ import annotations

from adapters.contract import AdapterState, InboundMessage, OutboundMessage, Ownership
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack, message
from tests.waiting import eventually


class Lease:
    def __init__(self, fence: int) -> None:
        self.holds = True
        self.ownership = Ownership(lease="slack:socket:A1", fence=fence, held=lambda: self.holds)


class Kept:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def __call__(self, inbound: InboundMessage) -> None:
        self.messages.append(inbound)


def adapter_for(api: FakeSlack) -> SlackAdapter:
    return SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, app_token=APP_TOKEN, signing_secret=SIGNING_SECRET,
                                      mode="socket", api_base_url=api.api_url, allowed_users=(ALICE,)))  # fmt: skip


async def test_only_the_holder_opens_the_socket_and_one_that_no_longer_holds_leaves_events_unacknowledged(
    fake_slack: FakeSlack,
) -> None:
    one, two = adapter_for(fake_slack), adapter_for(fake_slack)
    first, second = Kept(), Kept()
    assert one.receiving_lease() == two.receiving_lease() is not None
    try:
        # Before: start() took no receive argument, and every process opened a Socket Mode connection.
        await one.start(first, receive=False)
        await two.start(second, receive=False)
        assert fake_slack.connections == 0 and not fake_slack.calls_to("apps.connections.open")
        assert two.status().state is AdapterState.RUNNING and "sending only" in two.status().detail
        await two.send(OutboundMessage(chat_id=DM, text="sent without a socket"))
        await fake_slack.wait_posts(1)

        old = Lease(fence=1)
        await one.start_receiving(old.ownership)
        await fake_slack.wait_connections(1)
        await fake_slack.wait_acked(await fake_slack.push_event(message(DM, ALICE, "to the holder")))
        assert [m.text for m in first.messages] == ["to the holder"]

        old.holds = False  # its replica expired
        stale = await fake_slack.push_event(message(DM, ALICE, "after it lost the lease"))
        await eventually(lambda: "sending only" in one.status().detail, "the old holder to close its socket")
        assert stale not in [ack.get("envelope_id") for ack in fake_slack.acks]  # Slack delivers it again
        assert [m.text for m in first.messages] == ["to the holder"]

        await two.start_receiving(Lease(fence=2).ownership)
        await fake_slack.wait_connections(2)
        await fake_slack.wait_acked(await fake_slack.push_event(message(DM, ALICE, "to the new holder")))
        assert [m.text for m in second.messages] == ["to the new holder"] and len(first.messages) == 1
    finally:
        await one.close()
        await two.close()
