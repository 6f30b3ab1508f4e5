"""Where each chat with an open session last heard from: the points a catch-up after a reconnect reads from."""

from __future__ import annotations

import pytest

from storage import Store

pytestmark = pytest.mark.both_engines


def _payload(chat: str, message_id: str, at: float, thread: str | None = None, user: str = "U1") -> dict:
    """What the inbox keeps of a message (``InboundMessage.to_dict()``: the fields the query reads)."""
    return {"platform": "slack", "event_id": f"{chat}:{message_id}", "chat_id": chat, "chat_type": "group",
            "user_id": user, "text": "hi", "message_id": message_id, "thread_id": thread, "timestamp": at}  # fmt: skip


async def test_each_open_chat_is_listed_once_with_its_newest_stored_message(store: Store) -> None:
    # Two people's sessions in one channel, a thread of it, and a DM with nothing in the inbox.
    await store.create_session(session_key="slack:group:C1:user:U1", platform="slack", chat_id="C1", chat_type="group")
    await store.create_session(session_key="slack:group:C1:user:U2", platform="slack", chat_id="C1", chat_type="group")
    await store.create_session(session_key="slack:group:C1:thread:100.1", platform="slack", chat_id="C1",
                               chat_type="group", thread_id="100.1")  # fmt: skip
    dm = await store.create_session(session_key="slack:dm:D9", platform="slack", chat_id="D9", chat_type="dm")
    # Stored out of order: a message read back later is older than one received live before it.
    await store.inbox_accept("slack", "C1:200.5", "slack:group:C1:user:U1", _payload("C1", "200.5", 200.5))
    await store.inbox_accept("slack", "C1:150.0", "slack:group:C1:user:U2", _payload("C1", "150.0", 150.0, user="U2"))
    await store.inbox_accept("slack", "C1:120.0", "slack:group:C1:thread:100.1", _payload("C1", "120.0", 120.0, "100.1"))

    chats = await store.last_heard("slack")

    by_place = {(c.chat_id, c.thread_id): c for c in chats}
    assert len(chats) == 3
    assert (by_place[("C1", None)].message_id, by_place[("C1", None)].message_at) == ("200.5", 200.5)
    assert (by_place[("C1", "100.1")].message_id, by_place[("C1", "100.1")].message_at) == ("120.0", 120.0)
    assert (by_place[("D9", None)].message_id, by_place[("D9", None)].message_at) == (None, None)
    assert by_place[("D9", None)].session_started_at == dm.started_at
    assert by_place[("D9", None)].chat_type == "dm"


async def test_ended_sessions_and_other_platforms_are_left_out_and_the_newest_come_first(store: Store) -> None:
    ended = await store.create_session(session_key="slack:dm:D1", platform="slack", chat_id="D1", chat_type="dm")
    await store.end_session(ended.id, "reset")
    await store.create_session(session_key="discord:dm:9", platform="discord", chat_id="9", chat_type="dm")
    for n, chat in enumerate(["C1", "C2", "C3"]):
        await store.create_session(session_key=f"slack:group:{chat}:user:U1", platform="slack", chat_id=chat,
                                   chat_type="group")  # fmt: skip
        await store.inbox_accept("slack", f"{chat}:{n}", f"slack:group:{chat}:user:U1", _payload(chat, str(n), 1000.0 + n))
    # The discord inbox holds a message from a chat id that is also a slack one: not slack's.
    await store.inbox_accept("discord", "m", "discord:dm:9", {**_payload("C1", "777", 5000.0), "platform": "discord"})

    chats = await store.last_heard("slack", limit=2)

    assert [(c.chat_id, c.message_id) for c in chats] == [("C3", "2"), ("C2", "1")]


async def test_of_two_messages_sent_in_the_same_instant_the_one_stored_last_is_the_mark(store: Store) -> None:
    # Discord dates messages to the millisecond: two can share a send time. Either way round, the mark is the
    # later stored one, so the next catch-up does not read the other back again.
    for first, second in (("500", "501"), ("601", "600")):
        chat = f"C{first}"
        await store.create_session(session_key=f"slack:dm:{chat}", platform="slack", chat_id=chat, chat_type="dm")
        for message_id in (first, second):
            await store.inbox_accept("slack", f"{chat}:{message_id}", f"slack:dm:{chat}", _payload(chat, message_id, 42.0))

    chats = {c.chat_id: c.message_id for c in await store.last_heard("slack")}

    assert chats == {"C500": "501", "C601": "600"}
