"""Streamed replies on Telegram under pressure, end to end (real gateway, real aiogram, the Bot API emulator):
a refused markup on an edit, a 429 on an edit, Telegram's flood limits enforced with many chats
streaming at once, and a burst of messages to one chat."""

from __future__ import annotations

from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram
from tests.adapters.telegram.test_streaming_e2e import ANSWER, BOT, FINAL, GROUP, answered, grew
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Chat, Failure, TelegramAPI
from tests.gateway.conftest import settled

MARKDOWN = (
    "Here is **the plan** for [the trip](https://example.com/trip), step by step. "
    + " ".join(f"Step {n} is *easy* and uses `tool_{n}` with care." for n in range(1, 7))
    + "\n\n```python\nfor step in plan:\n    run(step)\n```\n\nThat is **all** of it."
)
"""Bold, italics, a link, inline code and a fence: every prefix of it is a partial Markdown to preview."""


async def test_a_stream_of_rich_markdown_never_draws_a_markup_error(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.script(Text(MARKDOWN, pace=30))
    run = await start_telegram()
    await telegram_api.say(ALICE, f"{BOT} plan my trip", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    calls = [c for c in telegram_api.calls if c.method in ("sendMessage", "editMessageText")]
    shown = telegram_api.screen.in_chat(GROUP.id)
    assert len(shown) == len(calls) >= 3, "every send and edit was accepted: no preview was refused"
    assert all(c.params.get("parse_mode") == "HTML" for c in calls), "no update had to fall back to plain text"
    [reply] = telegram_api.sent_to(GROUP.id)
    assert '<a href="https://example.com/trip">the trip</a>' in reply.text and "<pre>" in reply.text


async def test_an_edit_whose_markup_is_refused_goes_plain_and_the_answer_still_ends_formatted(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.fail("editMessageText", Failure.cant_parse())  # the first edit's HTML is refused
    model_server.script(Text(ANSWER, pace=25))
    run = await start_telegram()
    await telegram_api.say(ALICE, f"{BOT} tell me a long story", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    refused, again, *later = telegram_api.calls_to("editMessageText")
    assert refused.params.get("parse_mode") == "HTML" and "<b>short</b>" in refused.params["text"]
    assert again.params.get("parse_mode") is None and again.params["text"].startswith("The short version")
    assert later, "the stream went on after the refused edit"
    [reply] = telegram_api.sent_to(GROUP.id)
    # The plain text was for that one update; the final text is the formatted answer, as without the refusal.
    assert reply.visible == FINAL and reply.parse_mode == "HTML" and "<b>short</b>" in reply.text


async def test_a_429_on_an_edit_slows_the_stream_and_the_final_text_still_arrives(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.fail("editMessageText", Failure.too_many_requests(3))
    model_server.script(Text(ANSWER, pace=15))  # about five seconds of writing
    run = await start_telegram()
    await telegram_api.say(ALICE, f"{BOT} tell me a long story", chat=GROUP)
    await answered(run, telegram_api, GROUP.id)

    refused, after, *_ = telegram_api.calls_to("editMessageText")
    assert after.at - refused.at >= 3.0, "the next edit waited for retry_after"
    [reply] = telegram_api.sent_to(GROUP.id)
    texts = [entry.visible for entry in telegram_api.screen.in_chat(GROUP.id)]
    assert reply.visible == FINAL and texts[-1] == FINAL and grew(texts)
    assert telegram_api.rate_limited == 1, "one 429, scripted; none drawn by the stream itself"


async def test_many_chats_streaming_at_once_stay_inside_telegrams_limits(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.enforce_rates()
    model_server.responder = lambda record: Text(ANSWER, pace=40)
    groups = [Chat.supergroup(-100600 - n) for n in range(4)]
    run = await start_telegram()
    await telegram_api.say(ALICE, "tell me a long story")
    await telegram_api.say(BOB, "tell me a long story")
    for n, group in enumerate(groups):
        await telegram_api.say(ALICE if n % 2 else BOB, f"{BOT} tell me a long story", chat=group)
    chats = [ALICE.id, BOB.id, *(group.id for group in groups)]
    await telegram_api.wait_sent(len(chats))
    await settled(run.store)

    for chat_id in chats:
        [reply] = telegram_api.sent_to(chat_id)
        assert reply.visible == FINAL, chat_id
    assert len(telegram_api.drafts) >= 2 and all(len(telegram_api.sent_to(g.id)[0].edits) >= 1 for g in groups)
    assert telegram_api.rate_limited == 0


async def test_a_long_reply_and_a_command_answer_to_one_chat_draw_no_429(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.enforce_rates()
    paragraphs = [f"Paragraph {n}: " + " ".join(f"word{n}-{i}" for i in range(200)) for n in range(6)]
    long_answer = "\n\n".join(paragraphs)  # about 9,000 characters: three messages
    model_server.script(Text(long_answer))
    run = await start_telegram()
    await telegram_api.say(ALICE, "tell me everything")
    await telegram_api.wait_sent(1)
    await telegram_api.say(ALICE, "/status")  # its answer goes out among the reply's next messages
    await telegram_api.wait_sent(4)
    await settled(run.store)

    messages = telegram_api.sent_to(ALICE.id)
    status = [m for m in messages if m.visible.startswith("Session")]
    chunks = [m for m in messages if m not in status]
    assert len(status) == 1 and len(chunks) >= 3
    assert " ".join(m.visible for m in chunks).split() == long_answer.split(), "every part, once, in order"
    assert telegram_api.rate_limited == 0
