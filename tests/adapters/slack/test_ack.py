"""When Slack gets its acknowledgement: after intake stored the event, never after a failed intake.

These drive the adapter on its own, with a stand-in for the gateway's intake
callable (the adapter interface's inbound boundary), so intake can be made
slow or failing on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import adapters.slack.app as slack_app
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from adapters.contract import ChatType, InboundMessage
from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack, message, message_key, post_signed


class Intake:
    """Records what the adapter hands over; can fail or hold the next calls."""

    def __init__(self) -> None:
        self.received: list[InboundMessage] = []
        self.failures = 0
        self.hold: asyncio.Event | None = None
        self.arrived = asyncio.Event()

    async def __call__(self, inbound: InboundMessage) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("database is locked")
        if self.hold is not None:
            await self.hold.wait()
        self.received.append(inbound)
        self.arrived.set()


@pytest_asyncio.fixture
async def http_adapter(fake_slack: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, Intake]]:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    intake = Intake()
    await adapter.start(intake)
    yield adapter, intake
    await adapter.close()


async def test_failed_intake_is_not_acknowledged_so_slack_delivers_again(
    http_adapter: tuple[SlackAdapter, Intake],
) -> None:
    adapter, intake = http_adapter
    intake.failures = 1
    payload = message(DM, ALICE, "try again")
    assert (await post_signed(adapter.http_url or "", payload, SIGNING_SECRET)).status == 500
    assert intake.received == []
    assert (await post_signed(adapter.http_url or "", payload, SIGNING_SECRET, retry_num=1)).status == 200
    [received] = intake.received
    assert (received.event_id, received.chat_type, received.text) == (message_key(payload), ChatType.DM, "try again")
    assert adapter.status().last_inbound_at is not None


async def test_slow_intake_is_acknowledged_within_the_budget_and_still_completes(
    http_adapter: tuple[SlackAdapter, Intake], monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter, intake = http_adapter
    monkeypatch.setattr(slack_app, "ACK_BUDGET", 0.05)
    intake.hold = asyncio.Event()
    payload = message(DM, ALICE, "slow disk")
    answer = await post_signed(adapter.http_url or "", payload, SIGNING_SECRET)
    assert answer.status == 200 and intake.received == []
    intake.hold.set()
    await asyncio.wait_for(intake.arrived.wait(), 30)
    assert intake.received[0].event_id == message_key(payload)


async def test_after_stop_intake_the_endpoint_takes_no_events(http_adapter: tuple[SlackAdapter, Intake]) -> None:
    adapter, intake = http_adapter
    url = adapter.http_url or ""
    await adapter.stop_intake()
    with pytest.raises(OSError):
        await post_signed(url, message(DM, ALICE, "too late"), SIGNING_SECRET)
    assert intake.received == []
    assert adapter.status().state.value == "stopping"

