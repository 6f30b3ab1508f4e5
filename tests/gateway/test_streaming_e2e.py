"""Streamed replies (EDIT) through the real gateway: the loopback adapter and the real model SDK against the fake
model server writing its answer at a set pace."""

from __future__ import annotations

import pytest

from adapters.contract import Capabilities, Markup, StreamMode
from storage import Store
from tests.fakes.adapter import UNHURRIED, LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory, Running, settled
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL

ANSWER = " ".join(f"Sentence number {n} of the answer tells a little more." for n in range(1, 9))
"""Eight sentences, 72 words: about three seconds at 25 words a second."""


def streaming(adapter: LoopbackAdapter | None = None) -> LoopbackAdapter:
    adapter = adapter or LoopbackAdapter()
    adapter.streams = (StreamMode.EDIT,)
    return adapter


class ShortMessages(LoopbackAdapter):
    """Messages of at most 200 characters, so an answer outgrows one."""

    capabilities = Capabilities(max_message_length=200, length_unit="chars", can_edit=True, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip


async def nothing_live(store: Store) -> None:
    async def none() -> bool:
        return not await store.outbox_live()

    await eventually(none, "no streamed message left live")


def shown_by(running: Running, message_id: str) -> list[str]:
    """The texts one message showed, in order: as sent, then each edit."""
    sent = running.adapter.sent[int(message_id.removeprefix("m")) - 1]
    return [sent.text] + [e.text for e in running.adapter.edits if e.message_id == message_id]


async def test_a_reply_is_shown_as_it_is_written_then_edited_to_the_final_text(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(adapter=streaming())
    model_server.script(Text(ANSWER, pace=25))
    message = await running.adapter.inject("tell me a long story", chat_id="c1")
    await settled(running.store)
    await nothing_live(running.store)
    (streamed,) = running.adapter.sent  # one message: never a second one with the answer
    assert streamed.reply_to == message.message_id
    texts = shown_by(running, "m1")
    assert texts[-1] == ANSWER
    assert len(texts) >= 3, texts  # the first part, at least one edit while it was written, the final text
    assert streamed.text != ANSWER and ANSWER.startswith(streamed.text.rstrip())
    for earlier, later in zip(texts, texts[1:]):  # it only grows
        assert later.startswith(earlier.rstrip()), (earlier, later)


async def test_a_tool_using_turn_shows_one_evolving_message_and_no_progress_message(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(adapter=streaming())
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Text(ANSWER, pace=25))
    await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
    await settled(running.store)
    (streamed,) = running.adapter.sent
    assert streamed.text == "Working on it: searching past conversations…"
    texts = shown_by(running, "m1")
    assert texts[-1] == ANSWER and len(texts) >= 3


async def test_an_answer_longer_than_a_message_continues_in_new_messages_in_order(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(adapter=streaming(ShortMessages()))
    model_server.script(Text(ANSWER, pace=50))
    await running.adapter.inject("tell me a long story", chat_id="c1")
    await settled(running.store)
    await nothing_live(running.store)
    first, *rest = running.adapter.sent
    assert rest, "the answer did not fit one message"
    final_first = shown_by(running, "m1")[-1]
    assert " ".join([final_first, *(m.text for m in rest)]).split() == ANSWER.split()
    assert all(e.message_id == "m1" for e in running.adapter.edits)  # only the streamed message is edited


async def test_stop_mid_stream_ends_the_message_with_a_stopped_mark(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(adapter=streaming())
    model_server.script(Text(ANSWER, pace=8))  # about nine seconds
    await running.adapter.inject("tell me a long story", chat_id="c1")
    await eventually(lambda: running.adapter.sent, "the streamed message to be out")
    await running.adapter.inject("/stop", chat_id="c1")
    await settled(running.store)
    await nothing_live(running.store)
    await eventually(lambda: shown_by(running, "m1")[-1].endswith("— stopped"), "the stopped mark")
    final = shown_by(running, "m1")[-1]
    shown = final.removesuffix("— stopped").strip()
    assert shown and ANSWER.startswith(shown) and shown != ANSWER
    assert ANSWER not in running.adapter.texts()  # the answer never comes after it


async def test_an_interrupting_message_ends_the_stream_with_the_mark_and_gets_its_own_answer(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"sessions": {"busy": "interrupt"}}, adapter=streaming())
    model_server.script(Text(ANSWER, pace=8), Text("The second answer."))
    await running.adapter.inject("tell me a long story", chat_id="c1")
    await eventually(lambda: running.adapter.sent, "the streamed message to be out")
    await running.adapter.inject("actually, never mind", chat_id="c1")
    await settled(running.store)
    await nothing_live(running.store)
    assert shown_by(running, "m1")[-1].endswith("— stopped")
    await eventually(lambda: "The second answer." in running.adapter.texts() or any(
        e.text == "The second answer." for e in running.adapter.edits), "the second answer")  # fmt: skip


@pytest.mark.parametrize("setting", ["off", False])  # YAML's bare off reads as False
async def test_streaming_off_keeps_the_progress_message_and_a_separate_reply(
    start_gateway: GatewayFactory, model_server: ModelServer, setting: object
) -> None:
    running = await start_gateway({"gateway": {"streaming": setting}}, adapter=streaming())
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Text(ANSWER, pace=50))
    await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
    await settled(running.store)
    progress, reply = running.adapter.sent
    assert progress.text.startswith("Working on it") and reply.text == ANSWER
    # The progress message's last edit ("Used: ...") is recorded after the reply went out.
    await eventually(lambda: running.adapter.edits, "the progress message's last edit")
    assert {e.message_id for e in running.adapter.edits} == {"m1"}  # only the progress message
