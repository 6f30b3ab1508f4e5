"""DM pairing state on PostgreSQL (``store.pairing``): the same answers as ``storage/pairing.py``.

Not written yet: every member raises ``NotImplementedError`` until it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from storage.records import PairingCode

__all__ = ["PostgresPairing"]

Run = Callable[..., Awaitable[Any]]


class PostgresPairing:
    """``storage.contract.PairingStorage`` on the store's pool: ``write(op)`` runs ``op(conn)`` in a transaction,
    ``read(op)`` on a connection, both retried by the store."""

    def __init__(self, write: Run, read: Run) -> None:
        self._write = write
        self._read = read

    async def add_code(self, code: PairingCode, *, unless_offered_since: float | None = None) -> bool:
        raise NotImplementedError

    async def take_code(self, platform: str, code: str, now: float) -> PairingCode | None:
        raise NotImplementedError

    async def record_failure(self, platform: str, now: float) -> None:
        raise NotImplementedError

    async def clear_failures(self, platform: str) -> int:
        raise NotImplementedError

    async def failure_times(self, platform: str, since: float) -> list[float]:
        raise NotImplementedError

    async def approve(self, platform: str, user_id: str, user_name: str | None, now: float) -> None:
        raise NotImplementedError

    async def is_approved(self, platform: str, user_id: str) -> bool:
        raise NotImplementedError

    async def pending(self, now: float) -> list[PairingCode]:
        raise NotImplementedError

    async def approvals(self) -> list[tuple[str, str, str | None, float]]:
        raise NotImplementedError

    async def revoke(self, platform: str, user_id: str) -> bool:
        raise NotImplementedError
