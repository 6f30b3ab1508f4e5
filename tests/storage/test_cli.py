"""``switchboard sessions ...`` run in-process (``gateway.cli.main``) against a database in a temporary home."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from gateway.cli import main
from storage import NewMessage, Store


def run_cli(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(autouse=True)
def restore_structlog() -> Iterator[None]:
    """The command configures logging for its process; put the test process's back afterwards."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def stored(home: Path) -> dict[str, str]:
    """Two sessions on two platforms, one of them split by compression."""

    async def fill() -> dict[str, str]:
        async with await Store.open(home / "state.db") as store:
            tg = await store.create_session(session_key="telegram:42", platform="telegram", chat_id="42",
                                            title="trip plans", system_prompt="be brief")  # fmt: skip
            await store.append_messages(tg.id, [
                NewMessage("user", "Book a train to Lyon\nfor Friday"),
                NewMessage("assistant", "", tool_calls=[{"id": "c1", "name": "search", "arguments": '{"q": "train"}'}]),
                NewMessage("tool", "3 trains found", tool_call_id="c1", tool_name="search"),
            ])  # fmt: skip
            child = await store.split_session(tg.id, [NewMessage("user", "summary: train booked")])
            sl = await store.create_session(session_key="slack:T:C", platform="slack", chat_id="C")
            await store.append_messages(sl.id, [NewMessage("user", "部署 the release")])
            return {"tg": tg.id, "child": child.id, "slack": sl.id}

    return asyncio.run(fill())


def test_list_table_and_json(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "list") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["ID", "PLATFORM", "STARTED", "MSGS", "STATE", "TITLE"]
    assert [line.split()[0] for line in table[1:]] == [stored["slack"], stored["child"], stored["tg"]]
    assert "ended: compression" in table[3] and "trip plans #2" in table[2]

    assert run_cli("sessions", "list", "--platform", "telegram", "--limit", "1", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in listed] == [stored["child"]]
    assert "system_prompt" not in listed[0] and listed[0]["message_count"] == 1


def test_show(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "show", stored["tg"]) == 0
    out = capsys.readouterr().out
    assert f"Session {stored['tg']}  'trip plans'" in out
    assert "Messages (3)" in out and "Book a train to Lyon" in out and "for Friday" in out
    assert '→ search {"q": "train"}' in out and "(answers c1, search)" in out

    assert run_cli("sessions", "show", stored["tg"], "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["session"]["system_prompt"] == "be brief"
    assert [m["seq"] for m in document["messages"]] == [1, 2, 3]
    assert document["messages"][1]["tool_calls"] == [{"id": "c1", "name": "search", "arguments": '{"q": "train"}'}]


def test_search(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "search", "train*") == 0
    out = capsys.readouterr().out
    assert "«train" in out and stored["tg"] in out
    assert run_cli("sessions", "search", "部署", "--json") == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["session_id"] == stored["slack"] and "«部署»" in hit["snippet"]
    assert run_cli("sessions", "search", "no", "such", "thing") == 0
    assert "No messages match 'no such thing'." in capsys.readouterr().out


def test_a_limit_below_one_is_a_usage_error(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (("sessions", "list", "--limit", "-1"), ("sessions", "search", "train", "--limit", "0")):
        with pytest.raises(SystemExit) as exited:
            run_cli(*argv)
        assert exited.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_a_query_from_undecodable_shell_bytes_is_searched(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "search", "train\udcff", "--json") == 0  # how Python hands over a stray 0xff byte
    assert stored["tg"] in capsys.readouterr().out


def test_lineage(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "lineage", stored["child"], "--json") == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == [stored["tg"], stored["child"]]
    assert run_cli("sessions", "lineage", stored["tg"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert rows[0].startswith(f"*  {stored['tg']}") and stored["child"] in rows[1]


def test_export_is_json_lines(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "export", stored["tg"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["Book a train to Lyon\nfor Friday", "", "3 trains found"]


def test_unknown_session(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("show", "lineage", "export"):
        assert run_cli("sessions", command, "nope") == 1
        assert "no session with id 'nope'" in capsys.readouterr().err


def test_no_database_yet_reads_as_empty(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "list", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []
    assert run_cli("sessions", "search", "x") == 0
    assert run_cli("sessions", "show", "x") == 1
    assert not (home / "state.db").exists()
