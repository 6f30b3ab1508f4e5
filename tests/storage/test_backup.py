"""storage.backup against a real second process appending to the database the whole time."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from storage import SCHEMA_VERSION, BackupError
from storage import backup_database, check_database, database_in_use, restore_database

WRITER = Path(__file__).with_name("crash_writer.py")
REPO = Path(__file__).resolve().parents[2]


class Writer:
    """tests/storage/crash_writer.py in a subprocess; its acks are read on a thread so it never blocks on stdout."""

    def __init__(self, db: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen([sys.executable, str(WRITER), str(db)], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
        self.last_seq = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("ack "):
                with self._changed:
                    self.last_seq = max(self.last_seq, int(line.split()[2]))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_seq(self, seq: int) -> int:
        """Block until messages up to ``seq`` are acknowledged as committed; returns the newest acked seq."""
        with self._changed:
            while self.last_seq < seq:
                assert self.process.poll() is None, "the writer process died"
                self._changed.wait(timeout=1)
            return self.last_seq

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join()


@pytest.fixture
def writer(db_path: Path) -> Iterator[Writer]:
    running = Writer(db_path)
    try:
        yield running
    finally:
        running.stop()


def seqs(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[0] for row in conn.execute("SELECT seq FROM messages ORDER BY seq")]


def test_backup_is_a_consistent_snapshot_while_another_process_writes(writer: Writer, db_path: Path,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    acked_before = writer.wait_for_seq(300)
    assert database_in_use(db_path)

    copy = tmp_path / "backup" / "state.db"
    copy.parent.mkdir()
    check = backup_database(db_path, copy)
    after = writer.wait_for_seq(writer.last_seq + 300)  # the writer went on committing after the snapshot

    assert check.ok and check.schema_version == SCHEMA_VERSION
    copied = seqs(copy)
    assert copied == list(range(1, len(copied) + 1)), "one session's seqs run without gaps in a consistent copy"
    assert acked_before <= len(copied) < after
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert not Path(f"{copy}-wal").exists()
    with closing(sqlite3.connect(copy)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_restore_is_refused_while_the_database_is_open(writer: Writer, db_path: Path, tmp_path: Path) -> None:
    writer.wait_for_seq(30)
    copy = tmp_path / "copy.db"
    backup_database(db_path, copy)
    with pytest.raises(BackupError, match="open in another process"):
        restore_database(copy, db_path, keep=tmp_path / "kept.db")
    assert not (tmp_path / "kept.db").exists()


def test_restore_puts_the_copy_back_and_keeps_the_old_database(db_path: Path, tmp_path: Path) -> None:
    writer = Writer(db_path)
    writer.wait_for_seq(30)
    copy = tmp_path / "copy.db"
    backup_database(db_path, copy)
    writer.wait_for_seq(len(seqs(copy)) + 30)
    writer.stop()  # killed: its last commits are only in state.db-wal, which must travel with the kept file
    assert not database_in_use(db_path)
    newest = len(seqs(db_path))

    kept = tmp_path / "state.db.before-restore"
    restored = restore_database(copy, db_path, keep=kept)

    assert restored.ok and restored.schema_version == SCHEMA_VERSION
    assert seqs(db_path) == seqs(copy)
    assert len(seqs(kept)) == newest > len(seqs(copy))
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    with pytest.raises(BackupError, match="left from an earlier restore"):
        restore_database(copy, db_path, keep=kept)


def test_a_damaged_database_is_reported_and_never_backed_up(db_path: Path, tmp_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE filler (body TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    damage_pages(db_path)

    check = check_database(db_path)
    assert not check.ok and check.problems
    with pytest.raises(BackupError, match="integrity check"):
        backup_database(db_path, tmp_path / "copy.db")
    assert not (tmp_path / "copy.db").exists()


def test_a_missing_database_is_a_problem_not_a_new_file(tmp_path: Path) -> None:
    check = check_database(tmp_path / "nothing.db")
    assert check.problems == (f"no database file at {tmp_path / 'nothing.db'}",)
    assert not (tmp_path / "nothing.db").exists()
    with pytest.raises(BackupError, match="nothing to back up"):
        backup_database(tmp_path / "nothing.db", tmp_path / "copy.db")


def damage_pages(path: Path) -> None:
    """Overwrite the middle of the file (b-tree pages, not the header) with a pattern."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(size // 2)
        handle.write(b"\xa5" * 4096 * 4)
