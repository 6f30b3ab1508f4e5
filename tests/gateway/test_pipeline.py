"""The gateway end to end: loopback adapter -> intake -> lanes -> agent (real SDK, fake model) -> delivery."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from adapters.contract import AccessPolicy, ChatType, InboundMessage, Markup, RateLimited
from gateway.delivery.formatting import render
from gateway.turn.runner import INTERRUPTED_RESULT, NOTHING_TO_ADD
from storage import NewMessage, ToolCallRecord
from tests.fakes.adapter import LoopbackAdapter, TelegramHtmlLoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, Timeout, ToolCalls, ToolUse
from tests.fakes.telegram_api import parse_html
from tests.gateway.conftest import GatewayFactory, handled, settled, spoken
from tests.gateway.engines import open_database, refused
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


async def test_a_dm_gets_a_reply_and_everything_is_stored(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Text("**Hello** back"))
    message = await running.adapter.inject("hello there", chat_id="c1")
    (sent,) = await running.adapter.wait_sent(1)
    assert sent.chat_id == "c1" and sent.reply_to == message.message_id
    assert sent.text == "Hello back" and sent.markup is Markup.PLAIN  # the plain dialect drops the markers
    (session,) = await running.store.list_sessions()
    stored = await running.store.load_messages(session.id)
    assert [(m.role, m.content) for m in stored] == [("user", "hello there"), ("assistant", "**Hello** back")]
    assert session.input_tokens + session.cache_read_tokens + session.cache_write_tokens > 0
    await handled(running.store)  # the turn marks its event done just after sending


async def test_a_blank_answer_still_gets_the_user_a_reply(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Text(" \n\n "))
    await running.adapter.inject("anything to say?", chat_id="c1")
    (sent,) = await running.adapter.wait_sent(1)
    assert sent.text == NOTHING_TO_ADD
    (session,) = await running.store.list_sessions()
    stored = await running.store.load_messages(session.id)
    assert [m.role for m in stored] == ["user", "assistant"]  # the answer is kept as the model gave it
    await handled(running.store)
    # The next request leaves the blank answer out: the API refuses a whitespace-only text block.
    await running.adapter.inject("hello again", chat_id="c1")
    await running.adapter.wait_sent(2)
    assert model_server.requests[-1].status == 200 and "hello again" in running.adapter.texts()[-1]


RENDERS_TO_NOTHING = ["```", "```python", "#", ">", "[]()", "` `"]
"""Answers whose Markdown, rendered, shows nothing: an opening fence, a lone heading or quote
marker, an empty link, a code span of a space."""


@pytest.mark.parametrize("adapter_class", [LoopbackAdapter, TelegramHtmlLoopbackAdapter])
@pytest.mark.parametrize("answer", RENDERS_TO_NOTHING)
async def test_an_answer_that_renders_to_nothing_is_sent_as_written(
    start_gateway: GatewayFactory, model_server: ModelServer, answer: str, adapter_class: type[LoopbackAdapter]
) -> None:
    running = await start_gateway(adapter=adapter_class())
    model_server.script(Text(answer))
    await running.adapter.inject("say something odd", chat_id="c1")
    await settled(running.store)
    shown = [parse_html(m.text) if m.markup is Markup.TELEGRAM_HTML else m.text for m in running.adapter.sent]
    assert shown == [answer], "the user got no reply"
    (session,) = await running.store.list_sessions()
    assert [m.content for m in await running.store.load_messages(session.id)] == ["say something odd", answer]


async def test_a_tool_call_a_crash_left_unanswered_gets_a_stub_result(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    await running.adapter.inject("first question", chat_id="c1")
    await running.adapter.wait_sent(1)
    (session,) = await running.store.list_sessions()
    # What a crash in the middle of a tool loop leaves: the call is stored, its result never came.
    call = ToolCallRecord("call-1", "search", '{"q": "deploy"}')
    await running.store.append_messages(session.id, [NewMessage("assistant", "", tool_calls=(call,))])
    await running.adapter.inject("second question", chat_id="c1")
    await running.adapter.wait_sent(2)
    stored = await running.store.load_messages(session.id)
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("user", None), ("assistant", None), ("assistant", None), ("user", None), ("tool", "call-1"), ("assistant", None)
    ]  # fmt: skip
    assert stored[4].content == INTERRUPTED_RESULT
    await running.adapter.inject("third question", chat_id="c1")
    await running.adapter.wait_sent(3)
    assert [m.role for m in await running.store.load_messages(session.id)].count("tool") == 1  # repaired once


async def test_the_chat_shows_typing_while_the_model_works(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Timeout(seconds=1.0))  # a slow reply
    await running.adapter.inject("think about it", chat_id="c7")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await eventually(lambda: running.adapter.typing_chats == ["c7"])  # while the model is still thinking
    assert not running.adapter.sent
    await running.adapter.wait_sent(1)
    assert running.adapter.typing_chats == ["c7"]  # the refresh interval is 4 s: shown once


async def test_order_per_session_and_concurrency_across_sessions(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    for index in range(3):
        for chat in ("a", "b", "c"):
            await running.adapter.inject(f"{chat}{index}", chat_id=chat)
            await asyncio.sleep(0)  # one step of the event loop between two messages: the chats' turns interleave
    # Messages that arrive during a turn are answered together in the next one, so count texts, not replies.
    await eventually(lambda: all(f"{c}{i}" in " ".join(running.adapter.texts(c)) for c in "abc" for i in range(3)))
    for chat in ("a", "b", "c"):
        joined = " ".join(running.adapter.texts(chat))
        positions = [joined.index(f"{chat}{i}") for i in range(3)]
        assert positions == sorted(positions)
        assert all(joined.count(f"{chat}{i}") == 1 for i in range(3))  # each message answered once
    # Every session got its own conversation with the model.
    assert len({r.body["messages"][0]["content"][0]["text"] for r in model_server.requests}) == 3


async def test_messages_sent_during_a_turn_are_answered_together(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.script(Timeout(seconds=1.0))
    await running.adapter.inject("first")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await running.adapter.inject("second")
    await running.adapter.inject("third")
    await eventually(lambda: any("third" in t for t in running.adapter.texts()))
    texts = running.adapter.texts()
    assert len(texts) == 2 and "second" in texts[1] and "third" in texts[1], texts


async def test_stop_cancels_the_running_turn(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Timeout(seconds=10))
    await running.adapter.inject("write me a novel")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await running.adapter.inject("/stop")
    (reply,) = await running.adapter.wait_sent(1)
    assert reply.text.startswith("Stopped.")
    await handled(running.store)  # the stopped turn's message too


async def test_group_messages_need_a_mention(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(policy=AccessPolicy(allow_all=True, require_mention=True))
    await running.adapter.inject("chatter", chat_type=ChatType.GROUP, chat_id="g")
    await running.adapter.inject("@loopbot help me", chat_type=ChatType.GROUP, chat_id="g", mentioned=True)
    (reply,) = await running.adapter.wait_sent(1)
    assert "help me" in reply.text
    assert len(model_server.requests) == 1


async def test_a_command_for_another_bot_is_left_alone(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(policy=AccessPolicy(allow_all=True, require_mention=False))
    for text in ("/status@other_bot", "/summarize@other_bot the last hour", "/help@LoopBot", "hello"):
        await running.adapter.inject(text, chat_type=ChatType.GROUP, chat_id="g")
    await running.adapter.wait_sent(2)
    await settled(running.store)
    assert [spoken(r.body["messages"][-1]["content"][0]["text"]) for r in model_server.requests] == ["hello"]
    assert len(running.adapter.sent) == 2 and any(text.startswith("Commands:") for text in running.adapter.texts())


async def test_unknown_users_get_a_pairing_code_and_can_be_approved(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(policy=AccessPolicy())
    await running.adapter.inject("hi", user_id="stranger")
    (offer,) = await running.adapter.wait_sent(1)
    assert "pairing code" in offer.text and "stranger" in offer.text
    code = offer.text.split("pairing code: ")[1].split()[0]
    await running.adapter.inject("hi again", user_id="stranger")
    await settled(running.store)
    assert len(running.adapter.sent) == 1  # no second code within 10 minutes, and no agent turn
    approval = await running.gateway.intake._pairing.approve("loopback", code)
    assert approval.user_id == "stranger"
    await running.adapter.inject("now?", user_id="stranger")
    await running.adapter.wait_sent(2)
    assert "now?" in running.adapter.texts()[-1]


async def test_a_burst_of_messages_from_a_stranger_gets_one_pairing_code(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(policy=AccessPolicy())
    await asyncio.gather(*(running.adapter.inject(f"hello {n}", user_id="stranger") for n in range(5)))
    await running.adapter.wait_sent(1)
    await handled(running.store)  # every message of the burst
    assert len(running.adapter.sent) == 1
    assert len(await running.store.pairing.pending(now=time.time())) == 1


async def test_messages_replayed_after_a_crash_pass_the_access_and_command_checks_again(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path: Path, storage_url: str | None
) -> None:
    def left_over(n: int, text: str, user: str, chat_type: ChatType = ChatType.DM) -> InboundMessage:
        return InboundMessage(platform="loopback", event_id=f"before-{n}", chat_id=f"chat-{user}", chat_type=chat_type,
                              user_id=user, text=text)  # fmt: skip

    home = tmp_path / "home"
    store = await open_database(home, storage_url)  # accepted, then the process died before handling them
    for message in (left_over(1, "let me in", "stranger"), left_over(2, "hello all", "friend", ChatType.GROUP),
                    left_over(3, "/whoami", "friend"), left_over(4, "what time is it?", "friend")):  # fmt: skip
        await store.inbox_accept(message.platform, message.event_id, "loopback:dm:x", message.to_dict())
    await store.close()
    running = await start_gateway(policy=AccessPolicy(allowed_users=frozenset({"friend"})), home=home)
    await handled(running.store)
    assert "pairing code" in running.adapter.texts("chat-stranger")[0]  # offered a code, not answered
    assert any("loopback user id: friend" in text for text in running.adapter.texts("chat-friend"))  # /whoami
    assert [spoken(r.body["messages"][-1]["content"][0]["text"]) for r in model_server.requests] == ["what time is it?"]


async def test_a_stored_message_that_no_longer_reads_is_skipped_at_start_and_the_others_are_answered(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path: Path, storage_url: str | None
) -> None:
    home = tmp_path / "home"
    good = InboundMessage(platform="loopback", event_id="before-2", chat_id="chat-friend", chat_type=ChatType.DM,
                          user_id="friend", text="what time is it?")  # fmt: skip
    # As an older version could store it: an attachment name that is an object, not text.
    odd = {**good.to_dict(), "event_id": "before-1", "attachments": [{"kind": "file", "name": {"x": 1}}]}
    store = await open_database(home, storage_url)
    for payload in (odd, good.to_dict()):
        await store.inbox_accept("loopback", payload["event_id"], "loopback:dm:chat-friend", payload)
    await store.close()
    with capture_logs() as logs:
        running = await start_gateway(policy=AccessPolicy(allowed_users=frozenset({"friend"})), home=home)
        (reply,) = await running.adapter.wait_sent(1)
    assert "what time is it?" in reply.text
    [line] = [entry for entry in logs if entry["event"] == "inbound.replay_rejected"]
    assert line["event_id"] == "before-1" and "Attachment.name must be text" in line["reason"]
    await handled(running.store)


async def test_a_message_with_half_an_emoji_is_stored_and_answered(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway()
    await running.adapter.inject("half an emoji \ud83d here", user_name="Ann \ude00")
    (reply,) = await running.adapter.wait_sent(1)
    assert "half an emoji \ufffd here" in reply.text
    (session,) = await running.store.list_sessions()
    assert "half an emoji \ufffd here" in (await running.store.load_messages(session.id))[0].content


async def test_whoami_works_for_strangers(start_gateway: GatewayFactory) -> None:
    running = await start_gateway(policy=AccessPolicy())
    await running.adapter.inject("/whoami", user_id="u42", user_name="Ada")
    (reply,) = await running.adapter.wait_sent(1)
    assert "u42" in reply.text and "Ada" in reply.text and "not on the list" in reply.text


async def test_long_reply_is_chunked_in_order_and_rejected_markup_falls_back_to_plain(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    adapter = TelegramHtmlLoopbackAdapter()
    # The platform refuses the HTML of one chunk (as Telegram does entities it cannot parse), not the others.
    adapter.reject_markup_if = lambda message: "Paragraph 5:" in message.text
    running = await start_gateway(adapter=adapter)
    paragraphs = [f"Paragraph {i}: **bold {i}** " + "word " * 150 for i in range(12)]
    reply = "\n\n".join(paragraphs)
    model_server.script(Text(reply))
    chunks = render(reply, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16")
    (refused,) = [i for i, chunk in enumerate(chunks) if "Paragraph 5:" in chunk.text]
    assert len(chunks) >= 3 and 0 < refused < len(chunks) - 1  # chunks on either side of the refused one
    with capture_logs() as logs:
        await adapter.inject("tell me a lot")
        await adapter.wait_sent(1)
        await settled(running.store)
    # The refused chunk was offered once as HTML, then sent again as plain text in its own place.
    assert [(m.text, m.markup) for m in adapter.rejected] == [(chunks[refused].text, Markup.TELEGRAM_HTML)]
    assert [(m.text, m.markup) for m in adapter.sent] == [
        (chunk.plain, Markup.PLAIN) if i == refused else (chunk.text, Markup.TELEGRAM_HTML)
        for i, chunk in enumerate(chunks)
    ]
    fallback = adapter.sent[refused].text
    assert "<b>" not in fallback and "**" not in fallback and "Paragraph 5: bold 5 word" in fallback
    assert all(len(m.text.encode("utf-16-le")) // 2 <= 4096 for m in adapter.sent)
    # Nothing lost, nothing twice, in order: every paragraph's words arrive exactly once.
    received = re.sub(r"</?b>", "", "\n".join(m.text for m in adapter.sent))
    whole = [f"Paragraph {i}: bold {i} " + ("word " * 150).strip() for i in range(12)]
    assert [received.count(p) for p in whole] == [1] * 12
    assert [received.index(p) for p in whole] == sorted(received.index(p) for p in whole)
    # The fallback is logged, and the chunk's delivery says it went out plain.
    assert [(e["log_level"], e["platform"], e["chunk"]) for e in logs if e["event"] == "delivery.plain_fallback"] == [
        ("warning", "loopback", refused)
    ]
    assert [(e["chunk"], e["plain"]) for e in logs if e["event"] == "delivery.sent"] == [
        (i, i == refused) for i in range(len(chunks))
    ]
    assert not [e for e in logs if e["event"] == "delivery.failed"]


async def test_rate_limited_chunks_wait_and_are_sent_once(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    running.adapter.failures = [RateLimited(0.05)]
    model_server.script(Text("after the pause"))
    await running.adapter.inject("hi")
    (reply,) = await running.adapter.wait_sent(1)
    assert reply.text == "after the pause"
    await settled(running.store)
    assert len(running.adapter.sent) == 1


async def test_a_redelivered_event_is_answered_once(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    await running.adapter.inject("hello", event_id="evt-1")
    await running.adapter.inject("hello", event_id="evt-1")
    await running.adapter.wait_sent(1)
    await settled(running.store)
    assert len(running.adapter.sent) == 1 and len(model_server.requests) == 1


async def test_interrupt_mode_answers_the_newest_message_with_the_earlier_one_in_view(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"sessions": {"busy": "interrupt"}})
    model_server.script(Timeout(seconds=10))
    model_server.responder = lambda record: Text("answering both")
    await running.adapter.inject("summarise chapter one")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await running.adapter.inject("actually, chapter two")
    (reply,) = await running.adapter.wait_sent(1)
    assert reply.text == "answering both"
    last = str(model_server.requests[-1].body["messages"])
    assert "chapter one" in last and "chapter two" in last
    await settled(running.store)  # both messages handled
    assert len(running.adapter.sent) == 1


async def test_in_a_shared_thread_each_message_keeps_its_senders_name(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway()
    model_server.responder = lambda record: Text("noted")
    group = {"chat_id": "g1", "chat_type": ChatType.GROUP, "mentioned": True}
    await running.adapter.inject("the deploy is at five", user_id="u1", user_name="Alice", thread_id="t1", **group)
    await running.adapter.wait_sent(1)
    await running.adapter.inject("make it six", user_id="u2", user_name="Bob\nSmith", thread_id="t1", **group)
    await running.adapter.wait_sent(2)
    users = [m for m in model_server.last_request.messages if m["role"] == "user"]
    text = str(users)
    assert "Alice: the deploy is at five" in text and "Bob Smith: make it six" in text
    assert "Several people talk in this thread" in model_server.last_request.last_user_text

    # Outside threads each user has a session of their own: no names in the text, the note names them.
    await running.adapter.inject("just me here", user_id="u3", user_name="Carol", **group)
    await running.adapter.wait_sent(3)
    last = model_server.last_request.last_user_text
    assert last.startswith("just me here") and "[This message comes from Carol in a group chat.]" in last


async def test_a_turn_that_fails_unexpectedly_still_answers_the_user(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway()
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "plans"})))
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    # A store that fails mid-turn (as a full disk would): the tool call the model asks for
    # cannot be recorded, so the turn cannot go on.
    async with refused(running.database, "messages", "INSERT", "NEW.tool_calls IS NOT NULL"):
        await running.adapter.inject("what were my plans?", chat_id="c1")
        await eventually(lambda: any(text.startswith("Sorry") for text in running.adapter.texts("c1")))
        _progress, notice = running.adapter.texts("c1")  # the tool progress message went out first
        assert notice.startswith("Sorry, something went wrong on my side") and "send it again" in notice
        assert re.search(r"reference: [0-9a-f]{8}\)$", notice)
        await eventually(lambda: running.gateway.lanes.running() == 0)
        await eventually(lambda: bool(running.adapter.edits))
        assert running.adapter.edits[-1].text == "Failed. Used: session_search"  # not "Working on it" for good
        assert await running.store.inbox_unfinished() == []  # answered: not run again on every start
    await running.adapter.inject("hello again", chat_id="c1")
    await running.adapter.wait_sent(3)
    # The failed question stays in the history (the model sees it before the new message).
    assert running.adapter.texts("c1")[-1] == "re: what were my plans?hello again"
    (session,) = await running.store.list_sessions()
    stored = [(m.role, m.content) for m in await running.store.load_messages(session.id)]
    assert stored[:2] == [("user", "what were my plans?"), ("user", "hello again")]


async def test_how_long_an_undelivered_reply_is_kept_comes_from_the_config(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path: Path
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    for keep_hours, home in ((None, "default"), (0, "short")):
        overrides = {"gateway": {"undelivered_keep_hours": keep_hours}} if keep_hours is not None else None
        running = await start_gateway(overrides, home=tmp_path / home)
        running.adapter.failures = [RateLimited(3600)]  # longer than a sender waits inline: deferred
        await running.adapter.inject("hello", chat_id="c1")
        await eventually(lambda: running.gateway.lanes.running() == 0 and not running.adapter.failures)
        row = await running.store.outbox_get(1)
        assert row is not None and "rate limited" in (row.last_error or "")
        if keep_hours is None:
            assert row.status == "pending"  # kept for the background retry: 24 h by default
        else:
            assert row.status == "failed"  # kept no time at all: given up with the reason
