"""Buttons under a message through real slack-bolt: posted as an actions block, pressed through the fake Slack
(``block_actions`` over Socket Mode, and as a signed interactive POST in HTTP mode), acknowledged at once, handed
to ``on_button``, and removed by ``close_choice``."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from adapters.contract import Button, ButtonPress
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, Running, SlackFactory, Start
from tests.fakes.slack_api import FakeSlack, post_signed_form
from tests.waiting import eventually

CHOICE = (Button("allow:7", "Allow", "primary"), Button("deny:7", "Deny", "danger"), Button("later:7", "Later"))


class Presses:
    """An ``on_button`` listener that keeps every press."""

    def __init__(self) -> None:
        self.got: list[ButtonPress] = []

    async def __call__(self, press: ButtonPress) -> None:
        self.got.append(press)


async def pressable(start_adapter: Start, mode: str = "socket", **settings: object) -> tuple[Running, Presses]:
    running = await start_adapter(mode, **settings)
    presses = Presses()
    running.adapter.on_button = presses
    return running, presses


def press_of(ts: str, button: str, *, chat: str = CHANNEL, thread: str | None = None) -> ButtonPress:
    return ButtonPress(platform="slack", chat_id=chat, user_id=ALICE, button_id=button, message_id=ts,
                       thread_id=thread, user_name=ALICE.lower())  # fmt: skip


async def test_a_choice_is_an_actions_block_under_the_text(start_adapter: Start, fake_slack: FakeSlack) -> None:
    running, _ = await pressable(start_adapter)
    assert running.adapter.supports_buttons
    ts = await running.adapter.send_choice(CHANNEL, "Run <search> & see?", CHOICE, thread_id="1700000000.000100")

    (post,) = fake_slack.posts
    assert (post.ts, post.thread_ts, post.text) == (ts, "1700000000.000100", "Run &lt;search&gt; &amp; see?")
    section, actions = fake_slack.blocks_of(CHANNEL, ts)
    assert section["text"] == {"type": "plain_text", "text": "Run <search> & see?", "emoji": True}
    assert actions["type"] == "actions"
    shown = [(item["action_id"], item["text"]["text"], item.get("style")) for item in actions["elements"]]
    assert shown == [("allow:7", "Allow", "primary"), ("deny:7", "Deny", "danger"), ("later:7", "Later", None)]


async def test_a_socket_mode_press_is_acknowledged_and_handed_over_once(
    start_adapter: Start, fake_slack: FakeSlack
) -> None:
    running, presses = await pressable(start_adapter)
    thread = "1700000000.000200"
    ts = await running.adapter.send_choice(CHANNEL, "Allow the tool?", CHOICE, thread_id=thread)

    await fake_slack.wait_acked(await fake_slack.press(CHANNEL, ts, "deny:7", ALICE))
    await eventually(lambda: presses.got)
    await fake_slack.wait_acked(await fake_slack.press(CHANNEL, ts, "allow:7", ALICE))
    await eventually(lambda: len(presses.got) == 2)

    assert presses.got == [press_of(ts, "deny:7", thread=thread), press_of(ts, "allow:7", thread=thread)]
    assert running.received == []  # a press is no message for the agent


async def test_an_http_mode_press_is_acknowledged_and_handed_over_once(
    start_adapter: Start, fake_slack: FakeSlack
) -> None:
    running, presses = await pressable(start_adapter, "http")
    ts = await running.adapter.send_choice(DM, "Allow the tool?", CHOICE)
    url = running.adapter.http_url
    assert url is not None

    answer = await post_signed_form(url, fake_slack.press_payload(DM, ts, "allow:7", ALICE), SIGNING_SECRET)

    assert answer.status == 200
    await eventually(lambda: presses.got)
    await asyncio.sleep(0)  # nothing else is on its way
    assert presses.got == [press_of(ts, "allow:7", chat=DM)]
    forged = await post_signed_form(url, fake_slack.press_payload(DM, ts, "deny:7", "U0MALLORY"), "not-the-secret")
    assert forged.status == 401
    assert len(presses.got) == 1


async def test_closing_a_choice_replaces_its_text_and_removes_the_buttons(
    start_adapter: Start, fake_slack: FakeSlack
) -> None:
    running, _ = await pressable(start_adapter)
    ts = await running.adapter.send_choice(DM, "Allow?", CHOICE)

    await running.adapter.close_choice(DM, ts, "Allowed: run_query")

    (update,) = fake_slack.updates
    assert (update["ts"], update["text"]) == (ts, "Allowed: run_query")
    assert fake_slack.blocks_of(DM, ts) == [
        {"type": "section", "text": {"type": "plain_text", "text": "Allowed: run_query", "emoji": True}}
    ]
    with pytest.raises(ValueError, match="shows no button"):
        fake_slack.press_payload(DM, ts, "allow:7", ALICE)


async def test_a_press_where_the_bot_does_not_answer_is_acknowledged_and_not_handed_over(
    start_slack: SlackFactory, fake_slack: FakeSlack
) -> None:
    slack = await start_slack("socket", allowed_channels=["C0ELSEWHERE"])  # from config.yaml, as the gateway reads it
    await fake_slack.wait_connections(1)
    presses = Presses()
    adapter = slack.adapter
    adapter.on_button = presses
    refused = await adapter.send_choice(CHANNEL, "Allow?", CHOICE, thread_id="1700000000.000300")
    taken = await adapter.send_choice(DM, "Allow?", CHOICE)  # a DM is always answered

    with capture_logs() as logs:
        await fake_slack.wait_acked(await fake_slack.press(CHANNEL, refused, "allow:7", ALICE))
    await fake_slack.wait_acked(await fake_slack.press(DM, taken, "allow:7", ALICE))
    await eventually(lambda: presses.got)

    assert presses.got == [press_of(taken, "allow:7", chat=DM)]
    (line,) = [line for line in logs if line["event"] == "slack.button.ignored"]
    assert line["reason"] == f"channel {CHANNEL} is not in allowed_channels"


async def test_a_failing_listener_is_logged_and_later_presses_still_come(
    start_adapter: Start, fake_slack: FakeSlack
) -> None:
    running, kept = await pressable(start_adapter)

    async def failing(press: ButtonPress) -> None:
        await kept(press)
        if len(kept.got) == 1:
            raise RuntimeError("the approvals service broke")

    running.adapter.on_button = failing
    ts = await running.adapter.send_choice(DM, "Allow?", CHOICE)
    with capture_logs() as logs:
        await fake_slack.wait_acked(await fake_slack.press(DM, ts, "allow:7", ALICE))
        await eventually(lambda: [line for line in logs if line["event"] == "slack.button.failed"])
    await fake_slack.wait_acked(await fake_slack.press(DM, ts, "deny:7", ALICE))
    await eventually(lambda: len(kept.got) == 2)


async def test_slack_has_its_ack_while_the_listener_still_works(start_adapter: Start, fake_slack: FakeSlack) -> None:
    running, _ = await pressable(start_adapter, "http")
    release, entered = asyncio.Event(), asyncio.Event()

    async def slow(press: ButtonPress) -> None:
        entered.set()
        await release.wait()

    running.adapter.on_button = slow
    ts = await running.adapter.send_choice(DM, "Allow?", CHOICE)
    assert running.adapter.http_url is not None
    try:
        answer = await post_signed_form(running.adapter.http_url, fake_slack.press_payload(DM, ts, "allow:7", ALICE),
                                        SIGNING_SECRET)  # fmt: skip
        assert answer.status == 200
        assert entered.is_set() or await eventually(entered.is_set)
    finally:
        release.set()
