"""What a failed read or write met (``storage.fault_of``), quiet background warnings, and a check within a time budget."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from storage import Fault, FaultSeam, ReadFailedError, Store, WriteFailedError, check_database, fault_of
from storage.log import warn_at_most_once_a_minute
from tests.storage.conftest import new_session, user


def sqlite_error(db: Path, *setup: str, statement: str) -> sqlite3.Error:
    """The error SQLite itself raises for ``statement`` after ``setup`` on a fresh connection."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None, timeout=0)) as conn:
        for line in setup:
            conn.execute(line)
        with pytest.raises(sqlite3.Error) as caught:
            conn.execute(statement).fetchall()
    return caught.value


def test_each_kind_of_database_failure_is_named_and_our_own_mistakes_are_not(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, y TEXT NOT NULL)")
        full = sqlite_error(db, "PRAGMA max_page_count = 2", statement="INSERT INTO t (y) VALUES (randomblob(100000))")
        read_only = sqlite_error(db, "PRAGMA query_only = ON", statement="INSERT INTO t (y) VALUES ('a')")
        conn.execute("BEGIN IMMEDIATE")
        locked = sqlite_error(db, statement="INSERT INTO t (y) VALUES ('a')")
        conn.execute("ROLLBACK")
        constraint = sqlite_error(db, statement="INSERT INTO t (y) VALUES (NULL)")
        no_table = sqlite_error(db, statement="SELECT * FROM nowhere")
    (tmp_path / "junk.db").write_bytes(b"this is not a database at all" * 200)
    not_a_database = sqlite_error(tmp_path / "junk.db", statement="SELECT * FROM sqlite_master")

    assert fault_of(WriteFailedError(full, attempts=1)) is Fault.FULL
    assert fault_of(WriteFailedError(read_only, attempts=1)) is Fault.READ_ONLY
    assert fault_of(WriteFailedError(locked, attempts=15)) is Fault.LOCKED
    assert fault_of(ReadFailedError(not_a_database)) is Fault.DAMAGED
    assert fault_of(WriteFailedError(constraint, attempts=1)) is None  # a bug of ours: trying again cures nothing
    assert fault_of(ReadFailedError(no_table)) is None
    assert fault_of(TypeError("unsupported operand")) is None
    try:
        raise RuntimeError("the turn could not go on") from WriteFailedError(full, attempts=1)
    except RuntimeError as wrapped:
        assert fault_of(wrapped) is Fault.FULL  # also when re-raised as another error's cause
    assert [fault.transient for fault in Fault] == [True, True, True, True, False, True]  # only damage stays


async def test_a_store_reports_a_full_disk_as_such(store: Store, faults: FaultSeam) -> None:
    session = await new_session(store, "telegram:1")
    await faults.on_writer(lambda conn: conn.execute("PRAGMA max_page_count = 1").fetchall())  # as small as it is
    with pytest.raises(WriteFailedError) as caught:
        await store.append_messages(session.id, [user("x" * 100_000)])
    assert fault_of(caught.value) is Fault.FULL
    assert await store.ping()  # reads still work


def test_a_background_warning_that_repeats_is_written_once_a_minute() -> None:
    with capture_logs() as logs:
        for _ in range(50):
            warn_at_most_once_a_minute("storage.test_repeating", error="database or disk is full")
    assert [entry["event"] for entry in logs] == ["storage.test_repeating"]


def test_a_check_that_runs_out_of_time_says_so_instead_of_blocking(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("row %d " % n * 20,) for n in range(20_000)])
    assert check_database(db).complete
    hurried = check_database(db, budget=0.0)
    assert not hurried.complete
    assert all("schema_version" in problem for problem in hurried.problems)  # nothing damaged found (not ours)
