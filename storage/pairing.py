"""DM pairing state for the gateway: offered codes, approved users, failed approval attempts.

The policy (code alphabet, lifetimes, rate limits, lockouts) lives in
``gateway/inbound/pairing.py``; this module only stores and answers. Taking a code is
atomic: only an unused, unexpired code is handed out, and only once.
:class:`PairingStore` (``store.pairing``) runs these on the store's connections.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

import aiosqlite

from storage.records import PairingCode

__all__ = [
    "PairingStore",
    "add_code",
    "approvals",
    "approve",
    "clear_failures",
    "failure_times",
    "is_approved",
    "pending_codes",
    "record_failure",
    "revoke",
    "take_code",
]

_FIELDS: Final = ("code", "platform", "user_id", "user_name", "chat_id", "created_at", "expires_at", "used_at")
_CODE_COLUMNS: Final = ", ".join(_FIELDS)


def _code(row: tuple[object, ...]) -> PairingCode:
    return PairingCode(**dict(zip(_FIELDS, row)))  # type: ignore[arg-type]


def add_code(conn: sqlite3.Connection, *, code: PairingCode, unless_offered_since: float | None = None) -> bool:
    """Store a code; with ``unless_offered_since``, only if the user was offered none since then.

    The check and the insert are one statement on the single writer, so two
    messages arriving together cannot both get a code.
    """
    cursor = conn.execute(
        f"""INSERT INTO pairing_codes ({_CODE_COLUMNS}) SELECT ?, ?, ?, ?, ?, ?, ?, ?
            WHERE ? IS NULL OR NOT EXISTS (
                SELECT 1 FROM pairing_codes WHERE platform = ? AND user_id = ? AND created_at >= ?)""",
        (code.code, code.platform, code.user_id, code.user_name, code.chat_id, code.created_at, code.expires_at,
         code.used_at, unless_offered_since, code.platform, code.user_id, unless_offered_since),
    )  # fmt: skip
    return cursor.rowcount == 1


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


def clear_failures(conn: sqlite3.Connection, *, platform: str) -> int:
    """Forget every failed approval on a platform (the operator lifting a lockout); how many there were."""
    return conn.execute("DELETE FROM pairing_failures WHERE platform = ?", (platform,)).rowcount


def approve(conn: sqlite3.Connection, *, platform: str, user_id: str, user_name: str | None, now: float) -> None:
    """Approve a user; any other code still open for them is used up with it."""
    conn.execute(
        "UPDATE pairing_codes SET used_at = ? WHERE platform = ? AND user_id = ? AND used_at IS NULL",
        (now, platform, user_id),
    )
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


async def failure_times(conn: aiosqlite.Connection, *, platform: str, since: float) -> list[float]:
    rows = await conn.execute_fetchall(
        "SELECT failed_at FROM pairing_failures WHERE platform = ? AND failed_at >= ? ORDER BY failed_at",
        (platform, since),
    )
    return [float(row[0]) for row in rows]


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


Write = Callable[[Callable[[sqlite3.Connection], Any]], Awaitable[Any]]
Read = Callable[[Callable[[aiosqlite.Connection], Awaitable[Any]]], Awaitable[Any]]


class PairingStore:
    """The pairing state of one store (``store.pairing``): each call one write through its writer, or one read."""

    def __init__(self, write: Write, read: Read) -> None:
        self._write = write
        self._read = read

    async def add_code(self, code: PairingCode, *, unless_offered_since: float | None = None) -> bool:
        """Store a code; False (nothing stored) if the user was offered one at or after ``unless_offered_since``."""
        return bool(await self._write(partial(add_code, code=code, unless_offered_since=unless_offered_since)))

    async def take_code(self, platform: str, code: str, now: float) -> PairingCode | None:
        """Use up an unused, unexpired code, once; None if there is no such code."""
        taken: PairingCode | None = await self._write(partial(take_code, platform=platform, code=code, now=now))
        return taken

    async def record_failure(self, platform: str, now: float) -> None:
        await self._write(partial(record_failure, platform=platform, now=now))

    async def clear_failures(self, platform: str) -> int:
        """Forget the platform's failed approvals; how many were forgotten."""
        return int(await self._write(partial(clear_failures, platform=platform)))

    async def failure_times(self, platform: str, since: float) -> list[float]:
        """When approvals with a wrong code failed on this platform since ``since``, oldest first."""
        times: list[float] = await self._read(partial(failure_times, platform=platform, since=since))
        return times

    async def approve(self, platform: str, user_id: str, user_name: str | None, now: float) -> None:
        await self._write(partial(approve, platform=platform, user_id=user_id, user_name=user_name, now=now))

    async def is_approved(self, platform: str, user_id: str) -> bool:
        return bool(await self._read(partial(is_approved, platform=platform, user_id=user_id)))

    async def pending(self, now: float) -> list[PairingCode]:
        """Codes waiting for approval (unused, unexpired), oldest first."""
        codes: list[PairingCode] = await self._read(partial(pending_codes, now=now))
        return codes

    async def approvals(self) -> list[tuple[str, str, str | None, float]]:
        """Approved users: (platform, user_id, user_name, approved_at), newest first."""
        rows: list[tuple[str, str, str | None, float]] = await self._read(approvals)
        return rows

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Take an approval back; False if the user was not approved."""
        return bool(await self._write(partial(revoke, platform=platform, user_id=user_id)))
