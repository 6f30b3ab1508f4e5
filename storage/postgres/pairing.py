"""DM pairing state on PostgreSQL (``store.pairing``): the same answers as ``storage/pairing.py``.

SQLite makes its two atomic steps atomic by running every write on one writer. Here writers run side
by side, in this process and in others, at READ COMMITTED, so each step says how it stays atomic:

* ``add_code(..., unless_offered_since=...)``: an ``INSERT ... WHERE NOT EXISTS`` alone is not
  atomic (two transactions both see no code, both insert), so the transaction first takes an
  advisory lock on the user (``pg_advisory_xact_lock``, released at commit): the second one to
  come checks after the first has committed, and sees its code.
* ``take_code``: one ``UPDATE ... WHERE used_at IS NULL RETURNING``. A second taker blocks on the
  row, then checks the condition again on the committed row, finds it used and updates nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from storage.postgres.connection import Connection
from storage.records import PairingCode

__all__ = ["PostgresPairing"]

Run = Callable[..., Awaitable[Any]]

_CODE_COLUMNS: Final = "code, platform, user_id, user_name, chat_id, created_at, expires_at, used_at"


async def _add_code(conn: Connection, *, code: PairingCode, unless_offered_since: float | None) -> bool:
    if unless_offered_since is not None:  # one user's offers, one after another (see the module's docstring)
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('pairing ' || $1::text || ' ' || $2::text, 0))",
            code.platform, code.user_id,
        )  # fmt: skip
    inserted = await conn.fetchval(
        f"""INSERT INTO pairing_codes ({_CODE_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8
            WHERE $9::double precision IS NULL OR NOT EXISTS (
                SELECT 1 FROM pairing_codes WHERE platform = $2 AND user_id = $3 AND created_at >= $9)
            RETURNING 1""",
        code.code, code.platform, code.user_id, code.user_name, code.chat_id, code.created_at, code.expires_at,
        code.used_at, unless_offered_since,
    )  # fmt: skip
    return inserted is not None


async def _take_code(conn: Connection, *, platform: str, code: str, now: float) -> PairingCode | None:
    row = await conn.fetchrow(
        f"""UPDATE pairing_codes SET used_at = $1
            WHERE platform = $2 AND code = $3 AND used_at IS NULL AND expires_at > $1
            RETURNING {_CODE_COLUMNS}""",
        now, platform, code,
    )  # fmt: skip
    return PairingCode(**dict(row)) if row else None


async def _approve(conn: Connection, *, platform: str, user_id: str, user_name: str | None, now: float) -> None:
    await conn.execute(
        "UPDATE pairing_codes SET used_at = $1 WHERE platform = $2 AND user_id = $3 AND used_at IS NULL",
        now, platform, user_id,
    )  # fmt: skip
    await conn.execute(
        """INSERT INTO pairing_approvals (platform, user_id, user_name, approved_at) VALUES ($1, $2, $3, $4)
           ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,
                                                         approved_at = excluded.approved_at""",
        platform, user_id, user_name, now,
    )  # fmt: skip


class PostgresPairing:
    """``storage.contract.PairingStorage`` on the store's pool: ``write(op)`` runs ``op(conn)`` in a transaction,
    ``read(op)`` on a connection, both retried by the store."""

    def __init__(self, write: Run, read: Run) -> None:
        self._write = write
        self._read = read

    async def add_code(self, code: PairingCode, *, unless_offered_since: float | None = None) -> bool:
        """Store a code; False (nothing stored) if the user was offered one at or after ``unless_offered_since``."""
        return bool(
            await self._write(partial(_add_code, code=code, unless_offered_since=unless_offered_since), what="pairing")
        )

    async def take_code(self, platform: str, code: str, now: float) -> PairingCode | None:
        """Use up an unused, unexpired code, once; None if there is no such code."""
        taken: PairingCode | None = await self._write(
            partial(_take_code, platform=platform, code=code, now=now), what="pairing"
        )
        return taken

    async def record_failure(self, platform: str, now: float) -> None:
        async def op(conn: Connection) -> None:
            await conn.execute("INSERT INTO pairing_failures (platform, failed_at) VALUES ($1, $2)", platform, now)

        await self._write(op, what="pairing")

    async def clear_failures(self, platform: str) -> int:
        """Forget the platform's failed approvals; how many were forgotten."""

        async def op(conn: Connection) -> int:
            return len(await conn.fetch("DELETE FROM pairing_failures WHERE platform = $1 RETURNING 1", platform))

        return int(await self._write(op, what="pairing"))

    async def failure_times(self, platform: str, since: float) -> list[float]:
        """When approvals with a wrong code failed on this platform since ``since``, oldest first."""

        async def op(conn: Connection) -> list[float]:
            rows = await conn.fetch(
                "SELECT failed_at FROM pairing_failures WHERE platform = $1 AND failed_at >= $2 ORDER BY failed_at",
                platform, since,
            )  # fmt: skip
            return [float(row[0]) for row in rows]

        times: list[float] = await self._read(op)
        return times

    async def approve(self, platform: str, user_id: str, user_name: str | None, now: float) -> None:
        """Approve a user; any other code still open for them is used up with it."""
        await self._write(partial(_approve, platform=platform, user_id=user_id, user_name=user_name, now=now),
                          what="pairing")  # fmt: skip

    async def is_approved(self, platform: str, user_id: str) -> bool:
        async def op(conn: Connection) -> bool:
            return await conn.fetchval(
                "SELECT 1 FROM pairing_approvals WHERE platform = $1 AND user_id = $2", platform, user_id
            ) is not None  # fmt: skip

        return bool(await self._read(op))

    async def pending(self, now: float) -> list[PairingCode]:
        """Codes waiting for approval (unused, unexpired), oldest first."""

        async def op(conn: Connection) -> list[PairingCode]:
            rows = await conn.fetch(
                f"""SELECT {_CODE_COLUMNS} FROM pairing_codes WHERE used_at IS NULL AND expires_at > $1
                    ORDER BY created_at""",  # noqa: S608  (our column names)
                now,
            )  # fmt: skip
            return [PairingCode(**dict(row)) for row in rows]

        codes: list[PairingCode] = await self._read(op)
        return codes

    async def approvals(self) -> list[tuple[str, str, str | None, float]]:
        """Approved users: (platform, user_id, user_name, approved_at), newest first."""

        async def op(conn: Connection) -> list[tuple[str, str, str | None, float]]:
            rows = await conn.fetch(
                "SELECT platform, user_id, user_name, approved_at FROM pairing_approvals ORDER BY approved_at DESC"
            )
            return [(row[0], row[1], row[2], row[3]) for row in rows]

        rows: list[tuple[str, str, str | None, float]] = await self._read(op)
        return rows

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Take an approval back; False if the user was not approved."""

        async def op(conn: Connection) -> bool:
            return await conn.fetchval(
                "DELETE FROM pairing_approvals WHERE platform = $1 AND user_id = $2 RETURNING 1", platform, user_id
            ) is not None  # fmt: skip

        return bool(await self._write(op, what="pairing"))
