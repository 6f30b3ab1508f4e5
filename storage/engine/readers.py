"""A small pool of read-only connections; each query goes to the least busy one."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiosqlite

from storage.engine.connection import Role, connect
from storage.errors import ReadFailedError

__all__ = ["Readers"]

T = TypeVar("T")


class Readers:
    def __init__(self, conns: list[aiosqlite.Connection]) -> None:
        self._conns = conns
        self._in_flight = [0] * len(conns)

    @classmethod
    async def open(cls, path: Path, *, count: int, synchronous: str) -> Readers:
        conns: list[aiosqlite.Connection] = []
        try:
            for _ in range(count):
                conns.append(await connect(path, Role.READER, synchronous=synchronous))
        except BaseException:
            for conn in conns:
                await conn.close()
            raise
        return cls(conns)

    async def run(self, query: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run ``query`` on a reader connection; sqlite errors become ``ReadFailedError``."""
        index = min(range(len(self._conns)), key=self._in_flight.__getitem__)
        self._in_flight[index] += 1
        try:
            return await query(self._conns[index])
        except sqlite3.Error as error:
            raise ReadFailedError(error) from error
        finally:
            self._in_flight[index] -= 1

    async def close(self) -> None:
        for conn in self._conns:
            await conn.close()
