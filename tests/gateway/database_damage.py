"""Damaging a real database file the way a failing disk or a bad copy does, for tests."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
from pathlib import Path


def page_size(db: Path) -> int:
    with db.open("rb") as file:
        header = file.read(100)
    size = struct.unpack(">H", header[16:18])[0]
    return 65536 if size == 1 else size


def damage_page_holding(db: Path, table: str, marker: bytes) -> int:
    """Overwrite the header of the page of ``table``'s b-tree that holds ``marker``; returns the page number.

    The database must be checkpointed (the gateway closed). The page's type byte and cell count
    become nonsense, so SQLite reports "database disk image is malformed" (SQLITE_CORRUPT) to
    whoever reads that page, and ``PRAGMA quick_check`` finds it. Pages are found with SQLite's
    ``dbstat`` table.
    """
    with contextlib.closing(sqlite3.connect(db)) as conn:
        pages = [row[0] for row in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))]
    size = page_size(db)
    data = db.read_bytes()
    holding = [n for n in pages if marker in data[(n - 1) * size : n * size]]
    if not holding:
        raise AssertionError(f"no leaf page of {table} in {db} holds {marker!r}")
    number = holding[0]
    with db.open("r+b") as file:
        file.seek((number - 1) * size + (100 if number == 1 else 0))
        file.write(b"\xff" * 8)
        file.flush()
        os.fsync(file.fileno())
    return number


def damage_header(db: Path) -> None:
    """Overwrite the 16-byte "SQLite format 3" magic: the file no longer reads as a database."""
    with db.open("r+b") as file:
        file.write(b"this is not sqlite!"[:16])
        file.flush()
        os.fsync(file.fileno())
