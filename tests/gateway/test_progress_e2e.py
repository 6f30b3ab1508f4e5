"""Tool progress and outbox edits through the real gateway: loopback adapter, fake model server."""

from __future__ import annotations

import pytest

import gateway.delivery.progress
from adapters.contract import Capabilities, Markup
from tests.fakes.adapter import UNHURRIED, LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory, delivered, handled
from tests.gateway.engines import open_database
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


class NoEditAdapter(LoopbackAdapter):
    capabilities = Capabilities(max_message_length=4096, length_unit="chars", can_edit=False, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip


@pytest.fixture(autouse=True)
def no_edit_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throttling is covered with a fake clock in test_progress.py; here it would only make the tests slower."""
    monkeypatch.setattr(gateway.delivery.progress, "EDIT_INTERVAL", 0.0)


def two_tool_calls(model_server: ModelServer) -> None:
    model_server.script(
        ToolCalls(ToolUse("session_search", {"query": "trip to Lisbon"})),
        ToolCalls(ToolUse("weather", {"city": "Lisbon"})),  # unknown to the agent: an error result, the turn goes on
        Text("All done."),
    )


async def test_a_turn_with_tool_calls_shows_one_progress_message_edited_then_the_reply(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway()
    two_tool_calls(model_server)
    message = await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
    await running.adapter.wait_sent(2)
    await handled(running.store)
    await eventually(lambda: running.adapter.edits and running.adapter.edits[-1].text.startswith("Used:"),
                     "the final edit, which follows the reply")  # fmt: skip
    progress, reply = running.adapter.sent
    assert progress.text.startswith("Working on it: searching past conversations")
    assert progress.reply_to is None
    assert reply.text == "All done." and reply.reply_to == message.message_id
    edits = running.adapter.edits
    assert edits and {e.message_id for e in edits} == {"m1"} and {e.chat_id for e in edits} == {"c1"}
    assert edits[-1].text == "Used: session_search, weather"
    for edit in edits[:-1]:  # any intermediate edit lists what was done so far
        assert edit.text == "Working on it: searching past conversations, using weather…"
    assert len(running.adapter.sent) == 2
    await delivered(running.store)


async def test_a_plain_turn_sends_no_progress_message(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Text("Just an answer."))
    await running.adapter.inject("hi", chat_id="c1")
    await running.adapter.wait_sent(1)
    await handled(running.store)
    assert running.adapter.texts() == ["Just an answer."] and running.adapter.edits == []


async def test_no_progress_when_disabled_or_when_the_platform_cannot_edit(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    for overrides, adapter in (
        ({"gateway": {"tool_progress": False}}, LoopbackAdapter()),
        (None, NoEditAdapter()),
    ):
        model_server.reset()
        running = await start_gateway(overrides, adapter=adapter, home=tmp_path / adapter.__class__.__name__)
        two_tool_calls(model_server)
        await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
        await running.adapter.wait_sent(1)
        await handled(running.store)
        assert running.adapter.texts() == ["All done."] and running.adapter.edits == []
        await running.gateway.shutdown()


async def test_start_up_finishes_an_edit_a_crash_left_pending(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path, storage_url: str | None
) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    first = await start_gateway(home=home)
    await first.gateway.shutdown()
    # What a crash between recording an edit and making it leaves behind.
    store = await open_database(home, storage_url)
    (row,) = await store.outbox_add("progress:loopback:7", "loopback", "c1", None, ["Working on it…"])
    await store.outbox_mark_sent(row.id, "m-41")
    edited = await store.outbox_edit(row.id, "Used: memory", markup=Markup.PLAIN.value)
    assert edited is not None and edited.status == "pending"
    await store.close()

    adapter = LoopbackAdapter()
    running = await start_gateway(home=home, adapter=adapter)
    await delivered(running.store)  # resumed in the background from start-up on
    assert [(e.chat_id, e.message_id, e.text) for e in adapter.edits] == [("c1", "m-41", "Used: memory")]
    assert adapter.sent == []  # edited, never sent again
    after = await running.store.outbox_get(row.id)
    assert after is not None and (after.status, after.text, after.platform_message_id) == ("sent", "Used: memory", "m-41")
