"""The query sanitiser on its own: what user text turns into, and the CJK tokens both sides share."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.cjk import cjk_tokens, query_tokens
from storage.query import parse_query


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("docker", '"docker"'),
        ("deploy*", '"deploy"*'),
        ("deploy docker", '"deploy" AND "docker"'),
        ('"exact phrase" AND', '"exact phrase"'),
        ("chat-send P2.2", '"chat-send" AND "P2.2"'),
        ("a OR OR b NOT", '"a" OR "b"'),
        ("NOT a", '"a"'),
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
    assert query_tokens("大别山") == (["大别", "别山"], False)


@given(st.text(max_size=60))
def test_every_expression_is_valid_fts5(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    expression = parse_query(text).expression
    if expression:
        conn.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()
