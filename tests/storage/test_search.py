"""Full-text search: words, prefixes, tool calls, CJK of any length, and hostile query text."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import NewMessage, SearchHit, SearchOwner, Store
from storage.search.fulltext import HIGHLIGHT
from tests.storage.conftest import new_session

pytestmark = pytest.mark.both_engines

OPEN, CLOSE = HIGHLIGHT


@pytest_asyncio.fixture
async def corpus(store: Store) -> dict[str, int]:
    """A small history on two platforms; returns message ids by name."""
    tg = await new_session(store, "telegram:1", title="deploys")
    sl = await new_session(store, "slack:T:C", platform="slack", chat_id="C")
    call = {"id": "c1", "name": "terminal", "arguments": '{"cmd": "kubectl apply -f my-app.config.ts"}'}
    records = await store.append_messages(tg.id, [
        NewMessage("user", "How do I deploy the chat-send service to staging? See ticket P2.2"),
        NewMessage("assistant", "Running the deployment now.", tool_calls=[call]),
        NewMessage("tool", "deployment.apps/chat-send configured", tool_call_id="c1", tool_name="terminal"),
        NewMessage("user", "TODO: fix the flaky test (it's \"sometimes\" red)"),
    ])  # fmt: skip
    records += await store.append_messages(sl.id, [
        NewMessage("user", "我们用docker部署了服务，大别山的风景很好"),
        NewMessage("assistant", "日本語のテキストも検索できます"),
        NewMessage("user", "서울에서 만나요"),
        NewMessage("assistant", "Deploying to production is scheduled for Friday"),
    ])  # fmt: skip
    names = ["question", "call", "result", "todo", "chinese", "japanese", "korean", "production"]
    return {name: record.id for name, record in zip(names, records)}


def ids(hits: list[SearchHit]) -> set[int]:
    return {hit.message_id for hit in hits}


async def test_plain_word_finds_messages_with_snippet_and_session(store: Store, corpus: dict[str, int]) -> None:
    hits = await store.search("staging")
    assert ids(hits) == {corpus["question"]}
    (hit,) = hits
    assert f"{OPEN}staging{CLOSE}" in hit.snippet
    assert hit.platform == "telegram" and hit.role == "user" and hit.seq == 1 and hit.session_title == "deploys"
    session = await store.get_session(hit.session_id)
    assert session is not None and session.title == "deploys"


async def test_accents_are_ignored_both_ways_and_the_excerpt_marks_the_word_as_written(store: Store) -> None:
    session = await new_session(store, "telegram:2")
    await store.append_messages(session.id, [NewMessage("user", "filler " * 30 + "Le service est Déployé à Zürich"),
                                             NewMessage("user", "the cafe on the corner")])  # fmt: skip
    (hit,) = await store.search("deploye zurich")
    assert hit.snippet.endswith(f"{OPEN}Déployé{CLOSE} à {OPEN}Zürich{CLOSE}")
    (hit,) = await store.search("café")
    assert f"{OPEN}cafe{CLOSE}" in hit.snippet


async def test_prefix_query(store: Store, corpus: dict[str, int]) -> None:
    assert ids(await store.search("deploy*")) == {corpus["question"], corpus["call"], corpus["result"],
                                                  corpus["production"]}  # fmt: skip
    assert ids(await store.search('"deploy"')) == {corpus["question"]}  # quoted: the whole word only
    # bare, the word comes first, then the words it is part of (substring search, see test_substring.py)
    hits = await store.search("deploy")
    assert hits[0].message_id == corpus["question"]
    assert ids(hits) == {corpus["question"], corpus["call"], corpus["result"], corpus["production"]}


async def test_tool_call_arguments_and_tool_names_are_searchable(store: Store, corpus: dict[str, int]) -> None:
    hits = await store.search("kubectl")
    assert ids(hits) == {corpus["call"]}
    assert f"{OPEN}kubectl{CLOSE}" in hits[0].snippet
    assert ids(await store.search("terminal")) == {corpus["call"], corpus["result"]}


async def test_a_leading_not_never_finds_what_it_asked_to_leave_out(store: Store) -> None:
    session = await new_session(store, "telegram:4")
    found, other = await store.append_messages(
        session.id, [NewMessage("tool", "GET /health -> 404 NOT FOUND"), NewMessage("user", "found the health page")]
    )
    assert ids(await store.search("NOT FOUND")) == {found.id}
    assert ids(await store.search("health NOT 404")) == {other.id}  # between terms it is the operator


async def test_tool_call_arguments_are_searched_as_the_text_they_hold(store: Store) -> None:
    # Arguments arrive as a JSON string: newlines, quotes and non-ASCII letters are escaped
    # in it (``\n``, ``\"``, ``\u00fc``), and must not stick to the words or hide them.
    session = await new_session(store, "telegram:3")
    arguments = json.dumps({"cmd": "make build\ntestsuite --fast", "note": 'say "hello"', "city": "Zürich",
                            "topic": "部署", "path": "C:\\temp\\report.txt"})  # fmt: skip
    assert "\\u00fc" in arguments and "\\n" in arguments  # as an OpenAI-style model sends them
    call = {"id": "c9", "name": "run_shell", "arguments": arguments}
    (record,) = await store.append_messages(session.id, [NewMessage("assistant", "", tool_calls=[call])])
    for query in ("testsuite", "Zürich", "zurich", '"hello"', "部署", "report.txt", "temp"):
        assert ids(await store.search(query)) == {record.id}, query
    assert ids(await store.search("ntestsuite")) == set() and ids(await store.search("u00fc")) == set()
    (hit,) = await store.search("testsuite")
    assert f"run_shell make build {OPEN}testsuite{CLOSE} --fast" in hit.snippet  # the text, not the JSON
    await store.index_words()
    assert ids(await store.search("suite")) == {record.id}  # a substring, through the vocabulary


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("chat-send", {"question", "result"}),
        ("P2.2", {"question"}),
        ("P2", {"question"}),  # a part of a token the PostgreSQL parser keeps whole
        ("2", {"question"}),
        ("ts", {"call"}),  # a part of a file name in a tool call's argument
        ("apps/chat", {"result"}),
        ("my-app.config.ts", {"call"}),
        ('"flaky test"', {"todo"}),
        ("TODO: fix", {"todo"}),
        ('"sometimes', {"todo"}),
        ("it's", {"todo"}),
        ("staging OR production", {"question", "production"}),
        ("deploy* NOT staging", {"call", "result", "production"}),
        ("AND staging OR", {"question"}),
    ],
)
async def test_punctuation_and_operators(store: Store, corpus: dict[str, int], query: str, expected: set[str]) -> None:
    assert ids(await store.search(query)) == {corpus[name] for name in expected}


@pytest.mark.parametrize(
    "query",
    ['"', '""', "*", "-", ":", "AND", "OR NOT", "(", ")", "^", "content:staging", "NEAR(a b)", "{content}: x",
     "a\x00b", "   ", "", "\\", "'", "*deploy", "de*ploy", "++", "\u200b", "deploy\udcff", "\ud83d"],
)  # fmt: skip
async def test_hostile_queries_never_raise(store: Store, corpus: dict[str, int], query: str) -> None:
    await store.search(query)


async def test_half_of_a_surrogate_pair_in_a_query_is_dropped(store: Store, corpus: dict[str, int]) -> None:
    assert ids(await store.search("staging\udcff")) == ids(await store.search("staging")) != set()


async def test_column_filter_syntax_is_taken_literally(store: Store, corpus: dict[str, int]) -> None:
    assert await store.search("content:nothingmatches") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("部署", "chinese"),  # two characters: one token lookup
        ("大别山", "chinese"),  # three: a phrase of pairs
        ("部署了服务", "chinese"),
        ("山", "chinese"),  # one character: a prefix lookup
        ("docker", "chinese"),  # latin glued to CJK
        ("用docker部署", "chinese"),
        ("検索", "japanese"),
        ("テキスト", "japanese"),
        ("서울", "korean"),
    ],
)
async def test_cjk_substrings(store: Store, corpus: dict[str, int], query: str, expected: str) -> None:
    hits = await store.search(query)
    assert ids(hits) == {corpus[expected]}
    assert OPEN in hits[0].snippet


async def test_cjk_phrase_does_not_match_across_separate_runs(store: Store, corpus: dict[str, int]) -> None:
    assert await store.search("服务大别") == []  # both pairs exist, but a comma separates them
    assert await store.search("别山风") == []  # "的" sits between 山 and 风


async def test_nothing_matching(store: Store, corpus: dict[str, int]) -> None:
    assert await store.search("zebra") == []
    assert await store.search("不存在") == []


async def test_platform_filter_and_limit(store: Store, corpus: dict[str, int]) -> None:
    assert ids(await store.search("deploy*", platform="slack")) == {corpus["production"]}
    assert await store.search("deploy*", platform="discord") == []
    assert len(await store.search("deploy*", limit=2)) == 2
    assert await store.search("deploy*", limit=0) == []


async def test_an_owner_keeps_the_search_to_one_persons_or_one_conversations_sessions(store: Store) -> None:
    alice_dm = await new_session(store, "telegram:dm:1", chat_id="1", chat_type="dm", user_id="alice")
    alice_group = await new_session(store, "telegram:group:g:user:alice", chat_id="g", user_id="alice")
    bob_dm = await new_session(store, "telegram:dm:2", chat_id="2", chat_type="dm", user_id="bob")
    thread = await new_session(store, "telegram:group:g:thread:7", chat_id="g", thread_id="7")
    whole_group = await new_session(store, "telegram:group:g", chat_id="g")
    for session in (alice_dm, alice_group, bob_dm, thread, whole_group):
        await store.append_messages(session.id, [NewMessage("user", f"the locker code, said in {session.session_key}")])

    def sessions(hits: list[SearchHit]) -> set[str]:
        return {hit.session_id for hit in hits}

    alice = SearchOwner("telegram", user_id="alice")
    assert sessions(await store.search("locker", owner=alice)) == {alice_dm.id, alice_group.id}
    assert sessions(await store.search("locker", owner=SearchOwner("telegram", chat_id="g", thread_id="7"))) == {thread.id}
    assert sessions(await store.search("locker", owner=SearchOwner("telegram", chat_id="g"))) == {whole_group.id}
    assert await store.search("locker", owner=SearchOwner("slack", user_id="alice")) == []
    assert await store.search("locker", owner=alice, platform="slack") == []
    assert len(await store.search("locker")) == 5  # the operator's search (switchboard sessions search) sees all


async def test_hits_are_ranked_best_first(store: Store) -> None:
    session = await new_session(store)
    await store.append_messages(session.id, [
        NewMessage("user", "release notes mention the release once, in a long message about many other things"),
        NewMessage("user", "release release release"),
    ])  # fmt: skip
    hits = await store.search("release")
    assert [hit.seq for hit in hits] == [2, 1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
async def test_any_text_is_a_valid_query(store: Store, query: str) -> None:
    await store.search(query)
