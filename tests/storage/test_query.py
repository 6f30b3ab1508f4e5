"""The query sanitiser on its own: what user text turns into, and the CJK tokens both sides share."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.search.call_text import readable_calls
from storage.search.cjk import cjk_tokens, message_cjk_tokens, query_tokens
from storage.search.query import parse_query
from storage.records import ToolCallRecord


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("docker", '"docker"'),
        ("deploy*", '"deploy"*'),
        ("deploy docker", '"deploy" AND "docker"'),
        ('"exact phrase" AND', '"exact phrase"'),
        ("chat-send P2.2", '"chat-send" AND "P2.2"'),
        ("a OR OR b NOT", '"a" OR "b"'),
        ("NOT a", '"NOT" AND "a"'),  # not the opposite of what was asked: "a" alone
        ("404 NOT FOUND", '"404" NOT "FOUND"'),
        ("a OR NOT b", '"a" OR "NOT" AND "b"'),
        ('say "hi', '"say" AND "hi"'),
        ('quote"inside', '"quote" AND "inside"'),
        ("---", ""),
        ("*", ""),
        ("", ""),
        ("部署", '"部署"'),
        ("大别山", '"大别 别山"'),
        ("山", '"山"*'),
        ("用docker部署", '("用"* AND "docker" AND "部署")'),
        ("docker*部署", '("docker" AND "部署")'),
    ],
)
def test_expressions(text: str, expression: str) -> None:
    assert parse_query(text).expression == expression


def test_query_text_is_capped() -> None:
    assert len(parse_query("word " * 10_000).expression) < 20_000


def test_cjk_index_tokens() -> None:
    assert cjk_tokens(["大别山"]) == "大别 别山 山"
    assert cjk_tokens(["用docker部署", None, "plain"]) == "用 docker 部署 署"
    assert cjk_tokens(["only latin", None]) is None


_ARGUMENT_VALUES = st.one_of(st.text(alphabet="ab 部署\n\"é"), st.integers(), st.booleans(), st.none())


@given(
    content=st.text(alphabet="ab 大别山"),
    calls=st.lists(
        st.tuples(st.sampled_from(["terminal", "搜索"]), st.dictionaries(st.sampled_from(["q", "路径"]), _ARGUMENT_VALUES),
                  st.booleans()),
        max_size=3,
    ),
)  # fmt: skip
def test_message_cjk_tokens_read_tool_calls_as_the_index_does(content: str, calls: list) -> None:
    # The shortcut that skips decoding calls with no CJK in them changes nothing: escaped (\u90e8)
    # or written out, the pairs come from the decoded arguments, and JSON around them is never indexed.
    records = [ToolCallRecord(f"c{n}", name, json.dumps(args, ensure_ascii=escaped))
               for n, (name, args, escaped) in enumerate(calls)]  # fmt: skip
    assert message_cjk_tokens(content, None, records) == cjk_tokens([content, None, readable_calls(records)])
    assert query_tokens("大别山") == (["大别", "别山"], False)


@given(st.text(max_size=60))
def test_every_expression_is_valid_fts5(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    expression = parse_query(text).expression
    if expression:
        conn.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()
