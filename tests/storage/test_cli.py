"""``switchboard sessions ...`` run in-process (``gateway.operations.cli.main``) against a database in a temporary home."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from gateway.operations.cli import EXIT_BROKEN_PIPE, main
from gateway.operations.cli import sessions as sessions_cli
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


# -- defects found by trying the CLI from a shell --------------------------------------------------


@pytest.fixture
def long_session(home: Path) -> str:
    """One session whose output is far larger than a pipe's buffer (64 KiB on Linux)."""

    async def fill() -> str:
        async with await Store.open(home / "state.db") as store:
            session = await store.create_session(session_key="slack:T:C", platform="slack", chat_id="C")
            await store.append_messages(session.id, [NewMessage("user", f"message {i} " + "word " * 60) for i in range(3000)])
            return session.id

    return asyncio.run(fill())


@pytest.mark.parametrize("command", ["export", "show"])
def test_a_reader_that_stops_early_ends_the_command_quietly(home: Path, long_session: str, command: str) -> None:
    """``switchboard sessions export ID | head -1``: no BrokenPipeError traceback, the conventional status 141."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.operations.cli", "sessions", command, long_session],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "SWITCHBOARD_HOME": str(home)},
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()  # what `head -1` does: read a line, then close the pipe
    process.stdout.close()
    errors = process.stderr.read().decode()
    status = process.wait(timeout=60)
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors
    assert status == EXIT_BROKEN_PIPE == 141


def test_a_broken_pipe_that_is_not_stdout_keeps_its_traceback(
    stored: dict[str, str], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(args: object) -> int:
        raise BrokenPipeError("some other pipe")

    monkeypatch.setattr(sessions_cli, "list_command", broken)
    with pytest.raises(BrokenPipeError):
        run_cli("sessions", "list")  # stdout (a file under capfd) is fine, so this is a real error


def test_a_limit_above_the_maximum_is_a_usage_error(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    huge = "99999999999999999999"  # once an OverflowError from SQLite, with a traceback
    cases = ((("sessions", "list", "--limit", huge), 100000), (("sessions", "search", "train", "--limit", "501"), 500))
    for argv, most in cases:  # a search returns at most 500 hits: more is refused, not cut in silence
        with pytest.raises(SystemExit) as exited:
            run_cli(*argv)
        assert exited.value.code == 2 and f"must be at most {most}," in capsys.readouterr().err
    assert run_cli("sessions", "search", "train", "--limit", "500") == 0
    capsys.readouterr()
    assert run_cli("sessions", "list", "--limit", "100000", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)) == 3


def test_a_file_that_is_not_a_database_is_named_with_what_to_do(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "state.db").write_text("junk\n")
    for argv in (("sessions", "list"), ("sessions", "show", "x"), ("sessions", "search", "x", "--json")):
        assert run_cli(*argv) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"switchboard sessions: cannot read the database {home / 'state.db'}: file is not a database. "
            "Check storage.path in the config, or restore a backup (see switchboard restore --help).\n"
        )
    assert (home / "state.db").read_text() == "junk\n"


def test_a_database_switchboard_did_not_make_is_named(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as conn:
        conn.execute("CREATE TABLE other (x)")
        conn.commit()
    assert run_cli("sessions", "list") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"switchboard sessions: cannot read the database {home / 'state.db'}: ")
    assert "Switchboard did not create it" in err and "storage.path" in err


def test_a_database_from_a_newer_build_keeps_its_message(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def create() -> None:
        async with await Store.open(home / "state.db"):
            pass

    asyncio.run(create())
    with contextlib.closing(sqlite3.connect(home / "state.db")) as conn:
        conn.execute("UPDATE schema_version SET version = version + 1")
        conn.commit()
    assert run_cli("sessions", "list") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"switchboard sessions: database {home / 'state.db'} has schema version ")
    assert "Upgrade Switchboard" in err and "cannot read" not in err


def test_a_missing_database_is_noted_on_stderr(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = (
        f"switchboard sessions: no database at {home / 'state.db'} yet (nothing has been stored); "
        "check storage.url (or storage.path) in the config if you expected one.\n"
    )
    assert run_cli("sessions", "list", "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and captured.err == note
    assert run_cli("sessions", "list") == 0
    captured = capsys.readouterr()
    assert captured.out == "No sessions.\n" and captured.err == note
    assert run_cli("sessions", "export", "x") == 1
    assert capsys.readouterr().err == note + "switchboard sessions: no session with id 'x'\n"
    assert not (home / "state.db").exists()


def test_platform_ignores_case(stored: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("sessions", "list", "--platform", "Telegram", "--json") == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == [stored["child"], stored["tg"]]
    assert run_cli("sessions", "search", "train*", "--platform", "TELEGRAM", "--json") == 0
    assert {hit["session_id"] for hit in json.loads(capsys.readouterr().out)} == {stored["tg"], stored["child"]}


@pytest.mark.parametrize("words", [[""], ["   "], ["", " \t"]])
def test_a_query_without_words_is_a_usage_error(
    stored: dict[str, str], capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli("sessions", "search", *words)
    assert exited.value.code == 2
    assert "a search query needs at least one word" in capsys.readouterr().err
