"""Streamed replies on Telegram end to end: the real gateway and aiogram against the Bot API emulator,
the model writing its answer at a set pace through the real anthropic SDK.

Private chats show drafts (``sendMessageDraft``) and then the answer as one message; groups get a
message sent once there is enough text, then edited to the final text. What the user saw, in
order, is the emulator's screen (:mod:`tests.fakes.telegram_api.screen`).
"""

from __future__ import annotations

from tests.adapters.telegram.conftest import ALICE, StartTelegram, TelegramRun
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.telegram_api import Chat, Shown, TelegramAPI
from tests.gateway.conftest import settled
from tests.waiting import eventually

BOT = "@switchboard_test_bot"
ANSWER = "The **short** version first. " + " ".join(
    f"Sentence number {n} of the answer tells a little more." for n in range(1, 9)
)
"""Bold at the start (so a preview has markup to get wrong), then eight sentences: about three seconds at 25 words a second."""
FINAL = ANSWER.replace("**", "")
"""What the user reads once the answer is formatted."""
WORKING = "Working on it: searching past conversations…"
GROUP = Chat.supergroup(-100500)


def grew(texts: list[str]) -> bool:
    """Each text starts with the one before it (a stream only adds to what it showed)."""
    return all(later.startswith(earlier.rstrip()) for earlier, later in zip(texts, texts[1:]))


async def answered(run: TelegramRun, telegram_api: TelegramAPI, chat_id: int, count: int = 1) -> None:
    """Wait for the ``count``-th message to the chat (the turn is in the inbox then), then for every turn to end."""
    await telegram_api.wait_sent(count, where=lambda message: message.chat_id == chat_id)
    await settled(run.store)


def seen_in(telegram_api: TelegramAPI, chat_id: int) -> list[Shown]:
    return telegram_api.screen.in_chat(chat_id)


async def test_a_private_chat_sees_drafts_then_the_answer_as_one_message(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(Text(ANSWER, pace=25))
    run = await start_telegram()
    await telegram_api.say(ALICE, "tell me a long story")
    await answered(run, telegram_api, ALICE.id)

    [reply] = telegram_api.sent_to(ALICE.id)
    assert reply.visible == FINAL and reply.parse_mode == "HTML" and "<b>short</b>" in reply.text
    assert reply.edits == [], "the answer is sent once, finished: nothing to edit"
    shown = seen_in(telegram_api, ALICE.id)
    drafts = [entry for entry in shown if entry.kind == "draft"]
    assert [entry.kind for entry in shown] == ["draft"] * len(drafts) + ["message"]
    assert len(drafts) >= 2, "the answer was shown as it was written"
    assert len({d.draft_id for d in drafts}) == 1, "each draft replaces the last"
    assert FINAL.startswith(drafts[0].visible.rstrip()) and FINAL.startswith(drafts[-1].visible.rstrip())
    assert drafts[-1].visible != FINAL and grew([d.visible for d in drafts])
    assert telegram_api.screen.draft_on_screen(ALICE.id, reply.at) is None, "the message took the draft's place"


async def test_an_older_bot_api_server_falls_back_to_edits_and_is_not_asked_again(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.drafts_available = False  # answers sendMessageDraft 404 "method not found"
    model_server.script(Text(ANSWER, pace=25), Text(ANSWER, pace=25))
    run = await start_telegram()
    await telegram_api.say(ALICE, "tell me a long story")
    await answered(run, telegram_api, ALICE.id)
    await telegram_api.say(ALICE, "and once more")
    await answered(run, telegram_api, ALICE.id, 2)

    assert len(telegram_api.calls_to("sendMessageDraft")) == 1, "the refusal is remembered for private chats"
    first, second = telegram_api.sent_to(ALICE.id)
    for message in (first, second):
        assert message.visible == FINAL and message.parse_mode == "HTML"
        assert message.edits, "sent once there was text, then edited as it grew"
        assert grew([entry.visible for entry in seen_in(telegram_api, ALICE.id)
                     if entry.message_id == message.message_id])  # fmt: skip


async def test_a_group_gets_one_message_edited_as_the_answer_is_written(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(Text(ANSWER, pace=25))
    run = await start_telegram()
    question = await telegram_api.say(ALICE, f"{BOT} tell me a long story", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    [reply] = telegram_api.sent_to(GROUP.id)
    assert reply.visible == FINAL and reply.parse_mode == "HTML" and "<b>short</b>" in reply.text
    assert reply.reply_to == question["message"]["message_id"]
    texts = [entry.visible for entry in seen_in(telegram_api, GROUP.id)]
    assert len(texts) >= 3, texts  # the first part, at least one edit while it was written, the final text
    assert texts[0] != FINAL and texts[-1] == FINAL and grew(texts)
    assert telegram_api.calls_to("sendMessageDraft") == [], "groups have no drafts"


async def test_a_tool_using_turn_in_a_group_shows_one_message_from_the_tool_line_to_the_answer(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Text(ANSWER, pace=25))
    run = await start_telegram()
    await telegram_api.say(ALICE, f"{BOT} what did we plan for Lisbon?", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    [reply] = telegram_api.sent_to(GROUP.id)  # no separate progress message
    texts = [entry.visible for entry in seen_in(telegram_api, GROUP.id)]
    assert texts[0] == WORKING and texts[-1] == FINAL
    assert len(texts) >= 3 and grew(texts[1:]), texts
    assert reply.visible == FINAL


async def test_a_tool_using_turn_in_a_private_chat_shows_the_placeholder_then_the_answer(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Text(ANSWER, pace=25))
    run = await start_telegram()
    await telegram_api.say(ALICE, "what did we plan for Lisbon?")
    await answered(run, telegram_api, ALICE.id)

    [reply] = telegram_api.sent_to(ALICE.id)  # no progress message: the draft placeholder said it
    assert reply.visible == FINAL
    drafts = [entry.visible for entry in telegram_api.drafts]
    assert drafts[0] == "", "an empty draft asks for Telegram's own thinking placeholder while tools run"
    assert len(drafts) >= 2 and all(drafts[1:]) and grew(drafts[1:])


async def test_stop_mid_stream_in_a_group_ends_the_message_with_the_stopped_mark(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(Text(ANSWER, pace=6))  # about fifteen seconds: /stop comes well before the end
    run = await start_telegram()
    await telegram_api.say(ALICE, f"{BOT} tell me a long story", chat=GROUP)
    [streamed] = await telegram_api.wait_sent(1)
    await telegram_api.say(ALICE, f"/stop{BOT}", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    await eventually(lambda: streamed.visible.endswith("— stopped"), "the streamed message to end with the mark")
    shown = streamed.visible.removesuffix("— stopped").strip()
    assert shown and FINAL.startswith(shown) and shown != FINAL
    assert all(FINAL not in m.visible for m in telegram_api.sent), "the answer never comes after it"
