"""Event payloads -> InboundMessage: the cases the end-to-end tests do not reach."""

from __future__ import annotations

from adapters.contract import ChatType, InboundMessage
from adapters.slack.convert import Skip, ThreadReply, to_inbound
from adapters.slack.identity import BotIdentity
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID, mention, message

BOT = BotIdentity(user_id=BOT_USER_ID, bot_id=BOT_ID, name="switchbot", team_id=TEAM_ID)


def convert(payload: dict) -> InboundMessage:
    result = to_inbound(payload, BOT)
    assert isinstance(result, InboundMessage), result
    return result


def test_mention_with_a_display_name_is_stripped_and_escapes_undone() -> None:
    inbound = convert(mention("C1", "U1", f"hey <@{BOT_USER_ID}|switchbot>, is 1 &lt; 2 &amp;&amp; 3 &gt; 2?"))
    assert inbound.text == "hey , is 1 < 2 && 3 > 2?"
    assert (inbound.mentioned, inbound.chat_type, inbound.server_id) == (True, ChatType.GROUP, TEAM_ID)


def test_other_users_mentions_stay() -> None:
    assert convert(mention("C1", "U1", f"<@{BOT_USER_ID}> ask <@U0BOB>")).text == "ask <@U0BOB>"


def test_mention_inside_a_thread_keeps_the_thread() -> None:
    inbound = convert(mention("C1", "U1", "x", ts="1700000002.000200", thread_ts="1700000001.000100"))
    assert (inbound.thread_id, inbound.message_id) == ("1700000001.000100", "1700000002.000200")


def test_direct_message_thread_is_its_own_thread_and_top_level_has_none() -> None:
    assert convert(message("D1", "U1", "top")).thread_id is None
    assert convert(message("D1", "U1", "reply", thread_ts="1700000001.000100")).thread_id == "1700000001.000100"


def test_mention_event_in_a_dm_is_skipped_because_the_message_event_carries_it() -> None:
    assert isinstance(to_inbound(mention("D1", "U1", f"<@{BOT_USER_ID}> hi"), BOT), Skip)
    assert convert(message("D1", "U1", f"<@{BOT_USER_ID}> hi")).mentioned


def test_another_bot_is_passed_on_as_from_bot_and_our_own_is_skipped() -> None:
    other = convert(message("D1", None, "beep", subtype="bot_message", bot_id="B0OTHER"))
    assert (other.from_bot, other.user_id) == (True, "B0OTHER")
    assert isinstance(to_inbound(message("D1", None, "echo", subtype="bot_message", bot_id=BOT_ID), BOT), Skip)


def test_files_become_attachment_metadata() -> None:
    files = [
        {"id": "F1", "name": "notes.pdf", "mimetype": "application/pdf", "size": 10},
        {"id": "F2", "name": "memo.m4a", "mimetype": "audio/mp4", "size": 20},
    ]
    inbound = convert(message("D1", "U1", "", subtype="file_share", files=files))
    assert [(a.kind, a.name, a.ref, a.size) for a in inbound.attachments] == [
        ("document", "notes.pdf", "F1", 10), ("audio", "memo.m4a", "F2", 20)
    ]  # fmt: skip


def test_a_files_numbers_that_are_no_numbers_are_left_out() -> None:
    files = [{"id": "F1", "name": "odd.png", "mimetype": "image/png", "size": True, "original_w": "wide",
              "original_h": -3, "duration_ms": None, "url_private_download": "https://files.slack.com/x"}]  # fmt: skip
    (odd,) = convert(message("D1", "U1", "", subtype="file_share", files=files)).attachments
    assert (odd.size, odd.width, odd.height, odd.duration) == (None, None, None, None)
    assert odd.url == "https://files.slack.com/x"


def test_channel_thread_reply_waits_for_the_thread_check_already_marked_for_the_gateway() -> None:
    result = to_inbound(message("C1", "U1", "go on", channel_type="channel", ts="17.2", thread_ts="17.1"), BOT)
    assert isinstance(result, ThreadReply) and not result.mentions_bot
    inbound = result.message
    assert (inbound.event_id, inbound.thread_id, inbound.chat_type, inbound.mentioned) == (
        "C1:17.2", "17.1", ChatType.GROUP, True
    )  # fmt: skip
    assert result.thread == ("C1", "17.1")


def test_both_copies_of_a_mention_in_a_thread_get_the_same_event_id() -> None:
    text = f"<@{BOT_USER_ID}> again"
    copy = to_inbound(message("G1", "U1", text, channel_type="group", ts="17.3", thread_ts="17.1"), BOT)
    assert isinstance(copy, ThreadReply) and copy.mentions_bot
    the_mention = convert(mention("G1", "U1", text, ts="17.3", thread_ts="17.1"))
    assert copy.message == the_mention


def test_channel_messages_that_continue_no_thread_are_skipped() -> None:
    def skipped(**extra: object) -> bool:
        return isinstance(to_inbound(message("C1", "U1", "x", channel_type="channel", **extra), BOT), Skip)

    assert skipped(ts="17.1")  # top level
    assert skipped(ts="17.1", thread_ts="17.1")  # the thread's parent itself
    assert skipped(ts="17.2", thread_ts="17.1", bot_id="B0OTHER")
    assert skipped(ts="17.2", thread_ts="17.1", subtype="message_changed")
    assert skipped(ts="17.2", thread_ts="17.1", subtype="channel_join")
    assert not skipped(ts="17.2", thread_ts="17.1", subtype="thread_broadcast")
    assert not skipped(ts="17.2", thread_ts="17.1", subtype="file_share")


def test_every_channel_message_starts_a_turn_when_mentions_are_not_required() -> None:
    top = message("C1", "U1", "anyone know the deploy window?", channel_type="channel", ts="1700000003.000300")
    in_thread = message("C1", "U1", "and a follow-up", channel_type="channel", ts="1700000004.000400",
                        thread_ts="1700000001.000100")  # fmt: skip
    assert isinstance(to_inbound(top, BOT), Skip)  # the default: only mentions at the top level
    assert isinstance(to_inbound(in_thread, BOT), ThreadReply)  # ... and threads the bot takes part in
    started = to_inbound(top, BOT, every_message=True)
    assert isinstance(started, InboundMessage)
    assert (started.thread_id, started.mentioned, started.chat_type) == ("1700000003.000300", False, ChatType.GROUP)
    followed = to_inbound(in_thread, BOT, every_message=True)
    assert isinstance(followed, InboundMessage) and followed.thread_id == "1700000001.000100"
    assert not followed.mentioned  # the gateway's require_mention: false lets it through, nothing else
    other_bot = message("C1", None, "beep", channel_type="channel", subtype="bot_message", bot_id="B0OTHER")
    assert isinstance(to_inbound(other_bot, BOT, every_message=True), Skip)
