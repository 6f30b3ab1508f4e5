"""Telegram chats end to end: the real gateway and aiogram against the emulator, with real long polling."""

from __future__ import annotations

from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Chat, TelegramAPI, text_mention
from tests.fakes.telegram_api.wire import as_bool
from tests.gateway.conftest import spoken
from tests.waiting import eventually

BOT = "@switchboard_test_bot"


def echo(model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text("re: " + spoken(record.last_user_text))


def user_texts(model_server: ModelServer) -> list[str]:
    return [spoken(record.last_user_text) for record in model_server.requests]


async def test_a_direct_message_is_answered_in_html_as_a_reply(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("Hello **Alice**, you said: " + record.last_user_text)
    run = await start_telegram()
    update = await telegram_api.say(ALICE, "hi there")

    [reply] = await telegram_api.wait_sent(1)
    assert reply.chat_id == ALICE.id
    assert reply.visible == "Hello Alice, you said: hi there"
    assert reply.parse_mode == "HTML" and "<b>Alice</b>" in reply.text
    assert reply.reply_to == update["message"]["message_id"]
    assert reply.thread_id is None
    assert (ALICE.id, "typing", None) in telegram_api.actions
    assert run.adapter.bot_username == "switchboard_test_bot"
    # Polling began by removing any webhook without dropping what was waiting.
    [delete] = telegram_api.calls_to("deleteWebhook")
    assert not as_bool(delete.params.get("drop_pending_updates"))
    health = await run.health()
    assert health["adapters"]["telegram"]["state"] == "running", health
    await eventually(lambda: telegram_api.confirmed_below > update["update_id"], "the update to be confirmed")


async def test_group_messages_are_answered_only_when_the_bot_is_addressed(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    echo(model_server)
    await start_telegram()
    group = Chat.supergroup(-100500)

    await telegram_api.say(ALICE, "chatting among ourselves", chat=group)
    await telegram_api.say(ALICE, f"{BOT} first question", chat=group)
    [first] = await telegram_api.wait_sent(1)
    assert first.chat_id == group.id and first.visible == f"re: {BOT} first question"

    await telegram_api.say(ALICE, "a reply to the bot, no mention", chat=group, reply_to_bot=first.message_id)
    await telegram_api.wait_sent(2)
    words = "hey Switchboard, by name"
    await telegram_api.say(BOB, words, chat=group, entities=[text_mention(words, "Switchboard", telegram_api.bot)])
    await telegram_api.wait_sent(3)
    await telegram_api.say(ALICE, "/whoami@some_other_bot", chat=group)
    await telegram_api.say(ALICE, "/whoami@switchboard_test_bot", chat=group)
    whoami = (await telegram_api.wait_sent(4))[-1]
    await telegram_api.say(ALICE, f"{BOT} last one", chat=group)
    await telegram_api.wait_sent(5)

    assert str(ALICE.id) in whoami.visible and str(group.id) in whoami.visible
    assert user_texts(model_server) == [
        f"{BOT} first question", "a reply to the bot, no mention", words, f"{BOT} last one",
    ]  # fmt: skip
    assert not any("among ourselves" in text or "some_other_bot" in text for text in user_texts(model_server))


async def test_without_require_mention_every_group_message_is_answered(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    echo(model_server)
    await start_telegram(telegram={"require_mention": False})
    group = Chat.group(-4242)
    await telegram_api.say(ALICE, "no mention needed", chat=group)
    [reply] = await telegram_api.wait_sent(1)
    assert (reply.chat_id, reply.visible) == (group.id, "re: no mention needed")


async def test_group_messages_from_strangers_bots_and_unlisted_chats_are_ignored(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    echo(model_server)
    allowed, other = Chat.supergroup(-1001), Chat.supergroup(-1002)
    await start_telegram(telegram={"allowed_chats": [str(allowed.id)]})
    stranger = type(ALICE)(id=3003, first_name="Eve")
    robot = type(ALICE)(id=4004, first_name="Robot", username="other_bot", is_bot=True)
    await telegram_api.say(stranger, f"{BOT} let me in", chat=allowed)
    await telegram_api.say(robot, f"{BOT} bot talk", chat=allowed)
    await telegram_api.say(ALICE, f"{BOT} wrong group", chat=other)
    await telegram_api.say(ALICE, f"{BOT} right group", chat=allowed)
    [reply] = await telegram_api.wait_sent(1)
    assert (reply.chat_id, reply.visible) == (allowed.id, f"re: {BOT} right group")
    assert len(model_server.requests) == 1


async def test_forum_topics_are_separate_sessions_answered_in_their_topic(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    echo(model_server)
    run = await start_telegram()
    forum = Chat.supergroup(-100777, topics=(7, 9))

    await telegram_api.say(ALICE, f"{BOT} apples in seven", chat=forum, thread_id=7)
    await telegram_api.wait_sent(1)
    await telegram_api.say(BOB, f"{BOT} pears in nine", chat=forum, thread_id=9)
    await telegram_api.wait_sent(2)
    # Every topic message "replies" to the topic's creation message (here the bot's): not a mention.
    await telegram_api.say(ALICE, "unaddressed chatter in seven", chat=forum, thread_id=7)
    await telegram_api.say(BOB, f"{BOT} more in seven", chat=forum, thread_id=7)
    sent = await telegram_api.wait_sent(3)

    assert [(m.thread_id, m.visible) for m in sent] == [
        (7, f"re: {BOT} apples in seven"), (9, f"re: {BOT} pears in nine"), (7, f"re: {BOT} more in seven"),
    ]  # fmt: skip
    history = str(model_server.last_request.messages)
    assert "apples in seven" in history and "pears" not in history and "unaddressed" not in history
    # A topic is shared: each stored message keeps who said it.
    assert f"Alice: {BOT} apples in seven" in history and f"Bob: {BOT} more in seven" in history
    sessions = await run.store.list_sessions(platform="telegram")
    assert sorted((s.chat_id, s.thread_id, s.user_id) for s in sessions) == [
        (str(forum.id), "7", None), (str(forum.id), "9", None),
    ]  # fmt: skip


async def test_edited_messages_are_not_answered_again(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    echo(model_server)
    await start_telegram()
    original = await telegram_api.say(ALICE, "first draft")
    await telegram_api.wait_sent(1)
    await telegram_api.edit_user_message(original, "second draft")
    await telegram_api.say(ALICE, "a new message")
    await telegram_api.wait_sent(2)
    assert user_texts(model_server) == ["first draft", "a new message"]
