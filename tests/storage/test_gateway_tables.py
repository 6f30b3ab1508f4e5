"""The gateway's durable inbox, outbox and DM pairing state (the pairing tests run on both engines)."""

from __future__ import annotations

import asyncio

import pytest

from storage import OutboxChunk, PairingCode, Store

pytestmark = pytest.mark.both_engines


async def test_inbox_accepts_each_event_once(store: Store) -> None:
    payload = {"text": "hello", "from": {"id": 7}, "emoji": "😀"}
    assert await store.inbox_accept("telegram", "u1", "telegram:7", payload) is True
    assert await store.inbox_accept("telegram", "u1", "telegram:7", {"text": "redelivered"}) is False
    assert await store.inbox_accept("discord", "u1", "discord:7", {}) is True  # ids are per platform
    (first, second) = await store.inbox_unfinished()
    assert (first.platform, first.event_id, first.session_key, first.payload) == ("telegram", "u1", "telegram:7", payload)
    assert first.status == "accepted" and first.done_at is None
    assert second.platform == "discord"


async def test_concurrent_duplicates_are_accepted_once(store: Store) -> None:
    results = await asyncio.gather(*(store.inbox_accept("slack", "Ev1", "slack:T:C", {}) for _ in range(10)))
    assert sorted(results) == [False] * 9 + [True]


async def test_a_batch_mixing_new_seen_and_repeated_events_accepts_each_once(store: Store) -> None:
    assert await store.inbox_accept("telegram", "u1", "telegram:1", {}) is True
    results = await asyncio.gather(
        store.inbox_accept("telegram", "u1", "telegram:1", {}),  # seen before
        store.inbox_accept("telegram", "u2", "telegram:1", {}),
        store.inbox_accept("telegram", "u2", "telegram:1", {}),  # twice in the same batch
        store.inbox_accept("telegram", "u3", "telegram:1", {}),
    )
    assert results == [False, True, False, True]
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u1", "u2", "u3"]


async def test_done_events_leave_the_unfinished_list_in_arrival_order(store: Store) -> None:
    for n in range(5):
        await store.inbox_accept("telegram", f"u{n}", "telegram:1", {"n": n})
    assert await store.inbox_mark_done("telegram", "u1") is True
    assert await store.inbox_mark_done("telegram", "u1") is False
    assert await store.inbox_mark_done("telegram", "nope") is False
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u0", "u2", "u3", "u4"]


async def test_inbox_prune_forgets_only_old_finished_events(store: Store) -> None:
    await store.inbox_accept("telegram", "old", "telegram:1", {})
    await store.inbox_accept("telegram", "open", "telegram:1", {})
    await store.inbox_mark_done("telegram", "old")
    assert await store.inbox_prune(older_than=0) == 0
    assert await store.inbox_prune(older_than=10**12) == 1
    assert await store.inbox_accept("telegram", "old", "telegram:1", {}) is True  # outside the dedup window now
    assert [r.event_id for r in await store.inbox_unfinished()] == ["open", "old"]


async def test_outbox_keeps_chunks_in_order_per_chat(store: Store) -> None:
    a = await store.outbox_add("turn-a", "telegram", "1", None, ["a0", "a1", "a2"])
    b = await store.outbox_add("turn-b", "slack", "C", "ts", ["b0"])
    c = await store.outbox_add("turn-c", "telegram", "1", None, ["c0"])
    assert [r.chunk_index for r in a] == [0, 1, 2] and [r.id for r in a] == sorted(r.id for r in a)
    assert all(r.status == "pending" and r.attempts == 0 for r in a + b + c)
    pending = await store.outbox_pending()
    assert [(r.platform, r.text) for r in pending] == [("slack", "b0"), ("telegram", "a0"), ("telegram", "a1"),
                                                      ("telegram", "a2"), ("telegram", "c0")]  # fmt: skip
    assert pending[0] == b[0] and pending[0].thread_id == "ts" and pending[-1] == c[0]


async def test_outbox_chunks_keep_their_rendering(store: Store) -> None:
    chunks = [
        OutboxChunk(text="<b>hi</b>", plain="hi", markup="html", reply_to="m1"),
        OutboxChunk(text="second", markup="html"),
    ]
    queued = await store.outbox_add("turn-r", "telegram", "1", None, chunks)
    assert [(r.text, r.plain, r.markup, r.reply_to) for r in queued] == [
        ("<b>hi</b>", "hi", "html", "m1"),
        ("second", None, "html", None),
    ]
    assert await store.outbox_pending() == queued


async def test_outbox_add_is_idempotent_per_turn(store: Store) -> None:
    first = await store.outbox_add("turn-1", "telegram", "1", None, ["x", "y"])
    again = await store.outbox_add("turn-1", "telegram", "1", None, ["x", "y"])
    assert first == again
    assert len(await store.outbox_pending()) == 2


async def test_queued_rows_come_back_as_the_database_holds_them(store: Store) -> None:
    chunks = [OutboxChunk(text="one", plain="one", markup="html", reply_to="m9"), OutboxChunk(text="two")]
    fresh = await asyncio.gather(
        store.outbox_add("turn-a", "telegram", "1", None, chunks),
        store.outbox_add("turn-b", "slack", "C1", "171.2", ["three"]),
    )
    again = await asyncio.gather(  # queued before: read back, not made up
        store.outbox_add("turn-a", "telegram", "1", None, chunks),
        store.outbox_add("turn-c", "telegram", "1", None, ["four"]),
    )
    assert again[0] == fresh[0]
    for rows in (*fresh, *again):
        for row in rows:
            assert await store.outbox_get(row.id) == row


async def test_outbox_sent_and_failed(store: Store) -> None:
    ids = [r.id for r in await store.outbox_add("turn-1", "telegram", "1", None, ["x", "y", "z"])]
    assert await store.outbox_mark_sent(ids[0], "tg-msg-9") is True
    assert await store.outbox_mark_sent(ids[0], "tg-msg-10") is False
    assert await store.outbox_mark_failed(ids[1], "timeout") is True
    assert await store.outbox_mark_failed(ids[2], "403 forbidden", give_up=True) is True
    pending = await store.outbox_pending()
    assert [r.id for r in pending] == [ids[1]]
    assert pending[0].attempts == 1 and pending[0].last_error == "timeout" and pending[0].status == "pending"
    replay = await store.outbox_add("turn-1", "telegram", "1", None, ["x", "y", "z"])
    assert [(r.status, r.platform_message_id) for r in replay] == [("sent", "tg-msg-9"), ("pending", None),
                                                                  ("failed", None)]  # fmt: skip
    assert await store.outbox_prune(older_than=10**12) == 2
    assert [r.id for r in await store.outbox_pending()] == [ids[1]]


def code(value: str, user: str = "u1", *, at: float = 1000.0, ttl: float = 3600.0) -> PairingCode:
    return PairingCode(code=value, platform="telegram", user_id=user, user_name="Ann", chat_id="c1",
                       created_at=at, expires_at=at + ttl)  # fmt: skip


@pytest.mark.both_engines
async def test_pairing_codes_are_taken_once_and_only_while_valid(store: Store) -> None:
    await store.pairing.add_code(code("ABCD2345"))
    await store.pairing.add_code(code("EXPIRED9", at=0.0, ttl=10.0))
    assert await store.pairing.take_code("discord", "ABCD2345", now=1001.0) is None  # codes are per platform
    assert await store.pairing.take_code("telegram", "EXPIRED9", now=1001.0) is None
    taken = await store.pairing.take_code("telegram", "ABCD2345", now=1001.0)
    assert taken is not None and (taken.user_id, taken.user_name, taken.chat_id) == ("u1", "Ann", "c1")
    assert taken.used_at == 1001.0
    assert await store.pairing.take_code("telegram", "ABCD2345", now=1002.0) is None


@pytest.mark.both_engines
async def test_concurrent_takes_of_one_code_succeed_once(store: Store) -> None:
    await store.pairing.add_code(code("RACE2345"))
    results = await asyncio.gather(*(store.pairing.take_code("telegram", "RACE2345", now=1001.0) for _ in range(10)))
    assert sum(result is not None for result in results) == 1


@pytest.mark.both_engines
async def test_a_code_is_added_only_if_none_was_offered_since_the_given_time(store: Store) -> None:
    assert await store.pairing.add_code(code("FIRST234", at=1000.0), unless_offered_since=400.0)
    assert not await store.pairing.add_code(code("SECOND23", at=1500.0), unless_offered_since=900.0)
    assert await store.pairing.add_code(code("OTHER234", user="u2", at=1500.0), unless_offered_since=900.0)
    assert await store.pairing.add_code(code("THIRD234", at=1700.0), unless_offered_since=1100.0)
    results = await asyncio.gather(
        *(store.pairing.add_code(code(f"BURST{i}23", at=2500.0), unless_offered_since=1800.0) for i in range(5))
    )
    assert sorted(results) == [False, False, False, False, True]  # one statement decides, on the single writer
    stored = [c.code for c in await store.pairing.pending(now=2600.0)]
    assert stored[:3] == ["FIRST234", "OTHER234", "THIRD234"] and len(stored) == 4 and stored[3].startswith("BURST")


@pytest.mark.both_engines
async def test_approving_a_user_uses_up_their_other_open_codes(store: Store) -> None:
    await store.pairing.add_code(code("OLDER234", at=1000.0))
    await store.pairing.add_code(code("NEWER234", at=1700.0))
    await store.pairing.add_code(code("NOTME234", user="u2", at=1700.0))
    taken = await store.pairing.take_code("telegram", "NEWER234", now=1800.0)
    assert taken is not None
    await store.pairing.approve("telegram", "u1", "Ann", now=1800.0)
    assert await store.pairing.take_code("telegram", "OLDER234", now=1801.0) is None
    assert [c.code for c in await store.pairing.pending(now=1801.0)] == ["NOTME234"]


@pytest.mark.both_engines
async def test_approvals_and_revocation(store: Store) -> None:
    assert await store.pairing.is_approved("telegram", "u1") is False
    await store.pairing.approve("telegram", "u1", "Ann", now=1.0)
    await store.pairing.approve("telegram", "u1", "Ann B.", now=2.0)  # approving again is harmless
    assert await store.pairing.is_approved("telegram", "u1") is True
    assert await store.pairing.is_approved("slack", "u1") is False
    assert await store.pairing.revoke("telegram", "u1") is True
    assert await store.pairing.revoke("telegram", "u1") is False
    assert await store.pairing.is_approved("telegram", "u1") is False


@pytest.mark.both_engines
async def test_failures_are_counted_per_platform_and_window(store: Store) -> None:
    for at in (10.0, 20.0, 30.0):
        await store.pairing.record_failure("telegram", now=at)
    await store.pairing.record_failure("slack", now=25.0)
    assert await store.pairing.failure_times("telegram", 15.0) == [20.0, 30.0]
    assert await store.pairing.failure_times("telegram", 0.0) == [10.0, 20.0, 30.0]
    assert await store.pairing.failure_times("discord", 0.0) == []
    assert await store.pairing.clear_failures("telegram") == 3
    assert await store.pairing.failure_times("telegram", 0.0) == []
    assert await store.pairing.failure_times("slack", 0.0) == [25.0]


@pytest.mark.sqlite_only  # opens a second store on the file
async def test_usage_since_sums_model_calls_across_sessions(store: Store) -> None:
    timed = await Store.open(store.path, clock=lambda: 100.0)
    try:
        first = await timed.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
        second = await timed.create_session(session_key="telegram:2", platform="telegram", chat_id="2")
        await timed.add_usage(first.id, input_tokens=10, output_tokens=1, cost_usd=0.5)
    finally:
        await timed.close()
    await store.add_usage(second.id, input_tokens=5, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4,
                          last_prompt_tokens=9, cost_usd=0.25)  # fmt: skip
    everything = await store.usage_since(0.0)
    assert (everything.calls, everything.input_tokens, everything.output_tokens) == (2, 15, 3)
    assert (everything.cache_read_tokens, everything.cache_write_tokens) == (3, 4)
    assert everything.cost_usd == 0.75
    recent = await store.usage_since(1000.0)
    assert (recent.calls, recent.input_tokens) == (1, 5)
    assert (await store.usage_since(10**12)).calls == 0


@pytest.mark.both_engines
async def test_pending_codes_and_approvals_for_the_operator(store: Store) -> None:
    await store.pairing.add_code(code("OLDER234", user="u1", at=1000.0))
    await store.pairing.add_code(code("NEWER234", user="u2", at=2000.0))
    await store.pairing.add_code(code("GONE2345", user="u3", at=0.0, ttl=1.0))
    await store.pairing.take_code("telegram", "NEWER234", now=2001.0)
    assert [c.code for c in await store.pairing.pending(now=2002.0)] == ["OLDER234"]
    await store.pairing.approve("telegram", "u2", "Bo", now=5.0)
    await store.pairing.approve("slack", "U9", None, now=6.0)
    assert await store.pairing.approvals() == [("slack", "U9", None, 6.0), ("telegram", "u2", "Bo", 5.0)]
