"""Substring search inside words: the vocabulary, its background indexer, and the unindexed tail.

The behaviour runs on both engines; the vocabulary, the watermark and the indexer are SQLite's (``sqlite_only``)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from storage import NewMessage, PostgresStore, SearchHit, Store
from storage.search.indexer import WordIndexer
from storage.search.fulltext import HIGHLIGHT
from storage.search.words import MAX_WORD, message_words
from tests.storage.conftest import Watched, new_session, user
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines

OPEN, CLOSE = HIGHLIGHT


@pytest_asyncio.fixture
async def store(engine_name: str, db_path: Path, faults: Watched, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """The storage tests' store, except that SQLite's word indexer runs only when the test calls ``index_words()``."""
    opened: Any
    if engine_name == "postgresql":
        opened = await PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    else:
        opened = await Store.open(db_path, word_index_interval=None, faults=faults)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def manual(store: Store) -> Store:
    """The store, its search index kept up to date only by ``index_words()`` on SQLite."""
    return store


def progress(path: Path) -> tuple[int, int]:
    """(watermark, last message id) as the database holds them."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT words_through, (SELECT COALESCE(MAX(id), 0) FROM messages) FROM search_progress")
        watermark, last = row.fetchone()
    return watermark, last


def vocabulary(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {word for (word,) in conn.execute("SELECT word FROM search_words")}


def seqs(hits: list[SearchHit]) -> list[int]:
    return [hit.seq for hit in hits]


@pytest.mark.sqlite_only
async def test_mid_word_substrings_are_found_through_the_vocabulary(manual: Store, db_path: Path) -> None:
    session = await new_session(manual, title="ops")
    await manual.append_messages(session.id, [
        user("the redeployment finished"),
        user("the service was reconfigured"),
        user("nothing relevant here"),
    ])  # fmt: skip
    assert await manual.index_words() == 3
    watermark, last = progress(db_path)
    assert watermark == last == 3  # nothing left for the tail scan: hits below come from the vocabulary
    assert {"redeployment", "reconfigured", "finished"} <= vocabulary(db_path)
    assert seqs(await manual.search("ploy")) == [1]
    assert seqs(await manual.search("config")) == [2]
    assert seqs(await manual.search("CONFIG")) == [2]
    assert seqs(await manual.search("deploy config")) == []  # both terms, in one message
    assert await manual.search("zzz") == []


@pytest.mark.sqlite_only
async def test_substrings_are_found_before_the_indexer_ran(manual: Store, db_path: Path) -> None:
    first = await new_session(manual, "telegram:1")
    await manual.append_messages(first.id, [user("an old redeployment")])
    await manual.index_words()
    # a burst of appends from many sessions; the indexer has not seen any of it
    sessions = [await new_session(manual, f"telegram:{n}") for n in range(2, 22)]
    await asyncio.gather(*(
        manual.append_messages(s.id, [user(f"burst {n} unrelated text"), user(f"burst {n} was misdeployed")])
        for n, s in enumerate(sessions)
    ))  # fmt: skip
    watermark, last = progress(db_path)
    assert watermark == 1 and last == 41
    assert "misdeployed" not in vocabulary(db_path)
    hits = await manual.search("ploy", limit=50)
    assert len(hits) == 21  # 1 through the vocabulary, 20 from the tail scan
    assert {hit.session_id for hit in hits} == {first.id, *(s.id for s in sessions)}
    assert all(f"{OPEN}misdeployed{CLOSE}" in hit.snippet for hit in hits if hit.session_id != first.id)
    # once the indexer has caught up, the same query finds the same messages through the vocabulary
    assert await manual.index_words() == 40
    assert progress(db_path) == (41, 41)
    assert "misdeployed" in vocabulary(db_path)
    assert {hit.message_id for hit in await manual.search("ploy", limit=50)} == {hit.message_id for hit in hits}


@pytest.mark.sqlite_only
async def test_catch_up_in_slices_moves_the_watermark_monotonically(manual: Store, db_path: Path) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user(f"entry{n:04d}word") for n in range(2500)])
    assert progress(db_path) == (0, 2500)
    assert await manual.index_words(slices=1) == 2000  # one slice of SLICE_ROWS
    assert progress(db_path) == (2000, 2500)
    assert "entry1999word" in vocabulary(db_path) and "entry2000word" not in vocabulary(db_path)
    # the tail scan still covers the rest meanwhile
    assert seqs(await manual.search("y2400w")) == [2401]
    assert await manual.index_words() == 500
    assert await manual.index_words() == 0
    assert progress(db_path) == (2500, 2500)
    assert seqs(await manual.search("y2400w")) == [2401]
    assert seqs(await manual.search("y0007w")) == [8]


async def test_background_indexer_catches_up(db_path: Path) -> None:
    async with await Store.open(db_path, word_index_interval=0.01) as store:
        session = await new_session(store)
        await store.append_messages(session.id, [user("a backgrounded workload")])
        await eventually(lambda: progress(db_path) == (1, 1), "the indexer to catch up")
        assert "backgrounded" in vocabulary(db_path)


@pytest.mark.sqlite_only
async def test_busy_writer_defers_indexing_until_the_backlog_grows(
    manual: Store, faults: Watched, db_path: Path
) -> None:
    """While appends keep coming the indexer works only past its backlog bound; once they stop it catches up."""
    thread = await WordIndexer.open_thread(db_path, synchronous="normal")  # the store's own indexer is off
    indexer = WordIndexer(thread, faults.on_writer, faults.progress, interval=0.01, slice_rows=20,
                          busy_backlog=50, busy_share=0.0)  # any time spent writing makes the writer busy
    session = await new_session(manual)
    indexer.start()
    try:
        for n in range(60):  # each batch commits, so every tick of the indexer sees a busy writer
            await manual.append_messages(session.id, [user(f"busyword{n}x filler") for _ in range(5)])
            await asyncio.sleep(0.002)  # pacing, part of the scenario: appends that keep coming
        watermark, last = progress(db_path)
        assert last == 300
        assert watermark > 0  # the backlog passed 50: indexed while busy
        await eventually(lambda: progress(db_path) == (300, 300), "the indexer to catch up once the appends stop")
        assert {"busyword0x", "busyword59x"} <= vocabulary(db_path)
    finally:
        await indexer.close()


@pytest.mark.sqlite_only
async def test_a_writer_busy_a_small_share_of_the_time_does_not_hold_the_indexer_back(
    manual: Store, faults: Watched, db_path: Path
) -> None:
    """Appends that keep coming at a gateway's pace (a commit every tick, but little time writing) are
    indexed as they come, far below the backlog a busy writer waits for."""
    thread = await WordIndexer.open_thread(db_path, synchronous="normal")
    indexer = WordIndexer(thread, faults.on_writer, faults.progress, interval=0.01, slice_rows=20,
                          busy_backlog=10_000, busy_share=0.5)  # fmt: skip
    session = await new_session(manual)
    indexer.start()
    try:
        for n in range(1000):  # appends at a gateway's pace until the indexer is past 20 (it is, long before 1000)
            await manual.append_messages(session.id, [user(f"paceword{n}x filler")])
            if progress(db_path)[0] >= 20:
                break
            await asyncio.sleep(0.02)  # pacing, part of the scenario
        watermark, last = progress(db_path)
        assert 20 <= watermark <= last < 1000  # indexed while the appends were still coming
        assert "paceword0x" in vocabulary(db_path)
    finally:
        await indexer.close()


@pytest.mark.parametrize(
    "query",
    ["ploy", "PLOY", "ploy*", "*ploy", "ploy:", "-ploy", "ploy-", '"ploy', 'ploy"', "(ploy)", "ploy,", "^ploy",
     "OR ploy", "ploy AND", "ploy NOT"],
)  # fmt: skip
async def test_special_characters_around_a_substring(manual: Store, query: str) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user("the redeployment finished"), user("unrelated")])
    hits = await manual.search(query)
    assert seqs(hits) == [1], query
    assert f"{OPEN}redeployment{CLOSE}" in hits[0].snippet


@pytest.mark.parametrize(
    "query",
    ['"', "ploy\"ment", 'de"ploy', "re-deploy", "red*ploy", "NOT ploy", "ploy NOT ploy", '"ploy" OR', "ploy\x00x",
     "((((", "ploy OR OR config", "content:ploy", "çonfig", "plöy", "p", "pl", "🙂ploy🙂"],
)  # fmt: skip
async def test_hostile_substring_queries_never_raise(manual: Store, query: str) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user("the redeployment was reconfigured"), user("déployé")])
    await manual.search(query)
    await manual.index_words()
    await manual.search(query)


async def test_short_terms_and_quoted_words_stay_whole_words(manual: Store) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user("the redeployment finished"), user("ep ploy")])
    await manual.index_words()
    assert seqs(await manual.search("ep")) == [2]  # 2 letters: never a substring
    assert seqs(await manual.search("epl")) == [1]  # 3 letters: a substring
    assert seqs(await manual.search('"ploy"')) == [2]  # quoted: the word only
    assert seqs(await manual.search("ploy")) == [2, 1]  # bare: the word first, then words containing it


async def test_ranking_snippet_and_session_of_substring_hits(manual: Store) -> None:
    ops = await new_session(manual, "telegram:1", title="ops")
    chat = await new_session(manual, "slack:T:C", platform="slack", chat_id="C")
    await manual.append_messages(ops.id, [
        user("a redeployment is mentioned once in this long message about many other unrelated things"),
        user("redeployment redeployment redeployment"),
    ])  # fmt: skip
    await manual.append_messages(chat.id, [NewMessage("assistant", "a misconfiguration in the redeployment")])
    await manual.index_words()
    hits = await manual.search("deploym")
    assert (hits[0].session_id, hits[0].seq) == (ops.id, 2)  # BM25: the densest message first
    assert (hits[-1].session_id, hits[-1].seq) == (ops.id, 1)  # the long one with a single mention last
    assert len(hits) == 3
    assert hits[0].session_title == "ops" and hits[0].platform == "telegram" and hits[0].role == "user"
    assert all(f"{OPEN}redeployment{CLOSE}" in hit.snippet for hit in hits)
    (slack,) = await manual.search("deploym", platform="slack")
    assert slack.session_id == chat.id and slack.role == "assistant" and slack.session_title is None
    assert f"{OPEN}misconfiguration{CLOSE}" in (await manual.search("configur"))[0].snippet
    assert len(await manual.search("deploym", limit=2)) == 2


async def test_word_hits_fill_the_limit_before_substrings(manual: Store) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user("redeployment")] + [user("deploy") for _ in range(3)])
    await manual.index_words()
    assert seqs(await manual.search("deploy", limit=3)) == [2, 3, 4]  # enough whole words: no expansion
    assert seqs(await manual.search("deploy", limit=10))[-1] == 1


async def test_tool_call_arguments_and_tool_names_are_searched_as_substrings(manual: Store) -> None:
    session = await new_session(manual)
    call = {"id": "c1", "name": "terminal", "arguments": '{"cmd": "kubectl rollout restart"}'}
    await manual.append_messages(session.id, [
        NewMessage("assistant", "", tool_calls=[call]),
        NewMessage("tool", "done", tool_call_id="c1", tool_name="webfetcher"),
    ])  # fmt: skip
    assert seqs(await manual.search("ubect")) == [1]  # the tail scan
    assert seqs(await manual.search("fetch")) == [2]
    await manual.index_words()
    assert seqs(await manual.search("ubect")) == [1]  # the vocabulary
    assert seqs(await manual.search("fetch")) == [2]


async def test_accented_words_are_folded_in_the_vocabulary(manual: Store) -> None:
    session = await new_session(manual)
    await manual.append_messages(session.id, [user("le service a été redéployé hier")])
    await manual.index_words()
    assert seqs(await manual.search("deploye")) == [1]
    assert seqs(await manual.search("DÉPLOY")) == [1]


def test_message_words_mirror_the_word_index() -> None:
    texts = ["Déployé my-app.config_ts 用docker部署 大别山 x" + "a" * (MAX_WORD + 1), None, "abc"]
    # folded; words of 1-3 letters, pure CJK (the pair index has it) and overlong words are left out
    assert message_words(texts) == {"deploye", "config", "用docker部署"}
