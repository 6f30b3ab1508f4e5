"""What a cluster test checks once every replica has stopped: every message named by exactly one reply, in
order per chat, each reply answering the last message it names; and in the database nothing unfinished,
each message stored once, each conversation's history the replies its chat was shown, and no replica, claim or
lease left behind (a replica that stops cleanly leaves; one that was killed is reaped by the others)."""

from __future__ import annotations

import asyncpg

from storage import open_store
from tests.e2e_cluster.conversations import Load, tally
from tests.fakes.telegram_api import TelegramAPI


async def check_settled(dsn: str, load: Load, telegram: TelegramAPI) -> None:
    result = tally(load, telegram)
    assert (result.lost, result.duplicated, result.out_of_order, result.misdirected) == ([], [], {}, []), (
        f"lost {result.lost}, duplicated {result.duplicated}, out of order {result.out_of_order}, "
        f"misdirected {result.misdirected}"
    )
    store = await open_store(dsn)
    try:
        assert await store.inbox_unfinished() == []
        assert await store.outbox_pending() == []
        sessions = await store.list_sessions(platform="telegram", limit=load.chats + 10)
        assert sorted(s.chat_id for s in sessions) == sorted(str(load.user(c).id) for c in range(load.chats))
        for session in sessions:
            stored = await store.load_messages(session.id)
            roles = [m.role for m in stored]
            assert roles == ["user", "assistant"] * (len(roles) // 2), (session.chat_id, roles)
            shown = [m.text for m in telegram.sent_to(int(session.chat_id))]
            assert [m.content for m in stored if m.role == "assistant"] == shown, session.chat_id
    finally:
        await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        inbox = await conn.fetchrow("SELECT count(*), count(*) FILTER (WHERE status = 'done') FROM inbox")
        assert tuple(inbox) == (load.total, load.total), "each message stored once, and done"
        left = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM replicas), (SELECT count(*) FROM session_claims),"
            " (SELECT count(*) FROM leases WHERE holder IS NOT NULL)"
        )  # fmt: skip
        assert tuple(left) == (0, 0, 0), "replicas, session claims and held leases left after every replica stopped"
    finally:
        await conn.close()
