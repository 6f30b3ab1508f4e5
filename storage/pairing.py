"""DM pairing state for the gateway: offered codes, approved users, failed approval attempts.

The policy (code alphabet, lifetimes, rate limits, lockouts) lives in
``gateway/pairing.py``; this module only stores and answers. Taking a code is
atomic: only an unused, unexpired code is handed out, and only once.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import aiosqlite

from storage.records import PairingCode

__all__ = [
    "add_code",
    "approvals",
    "approve",
    "failures_since",
    "is_approved",
    "latest_code",
    "pending_codes",
    "record_failure",
    "revoke",
    "take_code",
]

_FIELDS: Final = ("code", "platform", "user_id", "user_name", "chat_id", "created_at", "expires_at", "used_at")
_CODE_COLUMNS: Final = ", ".join(_FIELDS)


def _code(row: tuple[object, ...]) -> PairingCode:
    return PairingCode(**dict(zip(_FIELDS, row)))  # type: ignore[arg-type]


def add_code(conn: sqlite3.Connection, *, code: PairingCode) -> None:
    conn.execute(
        f"INSERT INTO pairing_codes ({_CODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (code.code, code.platform, code.user_id, code.user_name, code.chat_id, code.created_at, code.expires_at,
         code.used_at),
    )  # fmt: skip


def take_code(conn: sqlite3.Connection, *, platform: str, code: str, now: float) -> PairingCode | None:
    """Use up a valid code: the code's record, or None if it is unknown, expired or already used."""
    row = conn.execute(
        f"""UPDATE pairing_codes SET used_at = ?
            WHERE platform = ? AND code = ? AND used_at IS NULL AND expires_at > ?
            RETURNING {_CODE_COLUMNS}""",
        (now, platform, code, now),
    ).fetchone()
    return _code(row) if row else None


def record_failure(conn: sqlite3.Connection, *, platform: str, now: float) -> None:
    conn.execute("INSERT INTO pairing_failures (platform, failed_at) VALUES (?, ?)", (platform, now))


def approve(conn: sqlite3.Connection, *, platform: str, user_id: str, user_name: str | None, now: float) -> None:
    conn.execute(
        """INSERT INTO pairing_approvals (platform, user_id, user_name, approved_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,
                                                         approved_at = excluded.approved_at""",
        (platform, user_id, user_name, now),
    )


def revoke(conn: sqlite3.Connection, *, platform: str, user_id: str) -> bool:
    cursor = conn.execute("DELETE FROM pairing_approvals WHERE platform = ? AND user_id = ?", (platform, user_id))
    return cursor.rowcount == 1


async def is_approved(conn: aiosqlite.Connection, *, platform: str, user_id: str) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM pairing_approvals WHERE platform = ? AND user_id = ?", (platform, user_id)
    )
    return bool(rows)


async def latest_code(conn: aiosqlite.Connection, *, platform: str, user_id: str) -> PairingCode | None:
    """The user's most recently offered code, used, expired or not."""
    rows = await conn.execute_fetchall(
        f"""SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE platform = ? AND user_id = ?
            ORDER BY created_at DESC LIMIT 1""",
        (platform, user_id),
    )
    return _code(tuple(rows[0])) if rows else None


async def failures_since(conn: aiosqlite.Connection, *, platform: str, since: float) -> int:
    rows = await conn.execute_fetchall(
        "SELECT COUNT(*) FROM pairing_failures WHERE platform = ? AND failed_at >= ?", (platform, since)
    )
    return int(rows[0][0])


async def pending_codes(conn: aiosqlite.Connection, *, now: float) -> list[PairingCode]:
    """Codes waiting for the operator: unused and unexpired, oldest first."""
    rows = await conn.execute_fetchall(
        f"SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE used_at IS NULL AND expires_at > ? ORDER BY created_at",
        (now,),
    )
    return [_code(tuple(row)) for row in rows]


async def approvals(conn: aiosqlite.Connection) -> list[tuple[str, str, str | None, float]]:
    """Approved users as (platform, user_id, user_name, approved_at), newest first."""
    rows = await conn.execute_fetchall(
        "SELECT platform, user_id, user_name, approved_at FROM pairing_approvals ORDER BY approved_at DESC"
    )
    return [(row[0], row[1], row[2], row[3]) for row in rows]
