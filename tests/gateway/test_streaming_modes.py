"""Drafts, native streams, refusals and the startup sweep, through the real gateway.

The draft and native ways are driven by small in-process adapters implementing the contract's
streaming methods (the real Telegram and Slack adapters are tested against their emulators in
their own suites); the model is the real SDK against the fake model server.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.contract import ChatType, Markup, OutboundMessage, StreamingUnsupported, StreamMode
from storage import OutboxChunk
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory, settled
from tests.gateway.test_streaming_e2e import ANSWER, nothing_live, shown_by
from tests.waiting import eventually


@dataclass(frozen=True, slots=True)
class Draft:
    chat_id: str
    draft_id: int
    text: str


class DraftAdapter(LoopbackAdapter):
    """Drafts in private chats (refused when ``refuse_drafts``), edits elsewhere."""

    def __init__(self, *, refuse_drafts: bool = False) -> None:
        super().__init__()
        self.drafts: list[Draft] = []
        self.refuse_drafts = refuse_drafts
        self.draft_calls = 0

    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        return (StreamMode.DRAFT, StreamMode.EDIT) if chat_type is ChatType.DM else (StreamMode.EDIT,)

    async def send_draft(self, chat_id: str, thread_id: str | None, draft_id: int, text: str, *,
                         markup: Markup = Markup.PLAIN) -> None:  # fmt: skip
        self.draft_calls += 1
        if self.refuse_drafts:
            raise StreamingUnsupported("method not found")
        self.drafts.append(Draft(chat_id, draft_id, text))


class NativeAdapter(LoopbackAdapter):
    """The platform's own streaming API in threads: appended text, a status line, then edits."""

    def __init__(self) -> None:
        super().__init__()
        self.streamed: dict[str, str] = {}
        self.stopped: list[str] = []
        self.statuses: list[str] = []

    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        return (StreamMode.NATIVE, StreamMode.EDIT) if thread_id else (StreamMode.EDIT,)

    async def start_stream(self, message: OutboundMessage, *, recipient_user_id: str | None = None) -> str:
        message_id = await self.send(message)
        self.streamed[message_id] = message.text
        return message_id

    async def append_stream(self, chat_id: str, message_id: str, text: str) -> None:
        assert message_id not in self.stopped, "appended to a stopped stream"
        self.streamed[message_id] += text

    async def stop_stream(self, chat_id: str, message_id: str) -> None:
        self.stopped.append(message_id)

    async def set_status(self, chat_id: str, thread_id: str | None, status: str) -> None:
        self.statuses.append(status)


def tools_then_answer(model_server: ModelServer) -> None:
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "x"})), Text(ANSWER, pace=25))


async def test_a_private_chat_streams_drafts_and_ends_with_one_message(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    adapter = DraftAdapter()
    running = await start_gateway(adapter=adapter)
    tools_then_answer(model_server)
    await running.adapter.inject("tell me a long story", chat_id="c1")
    await settled(running.store)
    assert running.adapter.texts() == [ANSWER] and running.adapter.edits == []  # one message, the answer
    assert adapter.drafts[0].text == ""  # tools ran: the platform's own "thinking" placeholder
    texts = [d.text for d in adapter.drafts if d.text]
    assert len(texts) >= 2 and all(ANSWER.startswith(t.rstrip()) for t in texts)
    assert len({d.draft_id for d in adapter.drafts}) == 1
    assert await running.store.outbox_live() == []


async def test_a_refused_draft_falls_back_to_edits_and_is_not_tried_again(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    adapter = DraftAdapter(refuse_drafts=True)
    running = await start_gateway(adapter=adapter)
    model_server.script(Text(ANSWER, pace=25), Text("Short second answer here."))
    await running.adapter.inject("tell me a long story", chat_id="c1")
    await settled(running.store)
    assert shown_by(running, "m1")[-1] == ANSWER and len(shown_by(running, "m1")) >= 2
    assert adapter.draft_calls == 1
    await running.adapter.inject("and again", chat_id="c1")
    await settled(running.store)
    assert adapter.draft_calls == 1  # remembered for private chats


async def test_a_thread_streams_natively_then_the_message_is_edited_to_the_final_text(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    adapter = NativeAdapter()
    running = await start_gateway(adapter=adapter)
    tools_then_answer(model_server)
    await running.adapter.inject("tell me a long story", chat_id="C1", thread_id="171.1")
    await settled(running.store)
    await nothing_live(running.store)
    (message,) = running.adapter.sent
    assert message.thread_id == "171.1"
    assert adapter.statuses[0] == "Working on it: searching past conversations…" and adapter.statuses[-1] == ""
    assert ANSWER.startswith(adapter.streamed["m1"].rstrip()) and len(adapter.streamed["m1"]) > len(message.text)
    assert adapter.stopped[:1] == ["m1"]
    assert running.adapter.edits[-1].text == ANSWER  # the final text, after the stream was stopped


async def test_the_startup_sweep_ends_a_live_message_whose_turn_will_not_run_again(
    start_gateway: GatewayFactory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    running = await start_gateway(adapter=LoopbackAdapter())
    store = running.store
    # What a crash leaves: a message streamed for a turn whose event was settled (stopped) before the kill.
    await store.inbox_accept("loopback", "e9", "loopback:c1", {})
    await store.inbox_mark_done("loopback", "e9")
    row = await store.outbox_stream_open("loopback:e9", "loopback", "c1", None, OutboxChunk(text=""))
    await store.outbox_stream_shown(row.id, "Half of an answer", "m-old", plain="Half of an answer")
    unseen = await store.outbox_stream_open("loopback:e10", "loopback", "c1", None, OutboxChunk(text=""))
    await running.gateway.shutdown()

    again = await start_gateway(adapter=LoopbackAdapter(), home=running.home)
    await eventually(lambda: again.adapter.edits, "the interrupted message edited")
    (edit,) = again.adapter.edits
    assert edit.message_id == "m-old" and edit.text.startswith("Half of an answer\n\n— interrupted")
    assert again.adapter.sent == []  # nothing posted anew
    await nothing_live(again.store)
    assert await again.store.outbox_get(unseen.id) is None  # never shown: dropped
