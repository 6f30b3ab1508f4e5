"""What ``switchboard check`` and ``doctor`` ask a PostgreSQL server: does it answer, which version, are the
extensions the schema needs there, can its database's character type hold CJK search, which schema version.

``await inspect_server(url, password=...)`` connects once (no pool, nothing written) and returns a
:class:`ServerReport`; a server that cannot be reached, or refuses the role or its password, raises
``ReadFailedError`` whose message names the trouble (asyncpg's errors never quote the password).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

import asyncpg

from storage.errors import ReadFailedError
from storage.postgres import migrations
from storage.postgres.schema import EXTENSIONS, LATEST

__all__ = ["MIN_SERVER_VERSION", "TESTED_SERVER_VERSION", "ServerReport", "inspect_server"]

MIN_SERVER_VERSION: Final = 13
"""The oldest major version supported: the schema needs generated columns (12) and pg_trgm's GIN operators;
12 no longer gets fixes from the PostgreSQL project."""
TESTED_SERVER_VERSION: Final = 15
"""The major version the test suite runs against."""


@dataclass(frozen=True, slots=True)
class ServerReport:
    """One look at the server and the database ``storage.url`` names."""

    where: str
    """``postgresql://user@host:port/database`` as the server reports it (no password)."""
    version: str
    """``server_version``, e.g. ``15.6 (Debian 15.6-0+deb12u1)``."""
    major: int
    extensions: dict[str, tuple[bool, bool]]
    """Each extension the schema needs: (the server offers it, it is installed in the database)."""
    ctype: str
    """The database's LC_CTYPE: trigrams of CJK text need a UTF-8 one."""
    encoding: str
    schema_version: int | None
    """The schema version recorded, 0 for an empty database; None when it cannot be told (tables not ours)."""
    schema_problem: str | None = None
    build_version: int = LATEST

    @property
    def supported(self) -> bool:
        return self.major >= MIN_SERVER_VERSION

    @property
    def utf8_ctype(self) -> bool:
        """The character type classifies non-ASCII letters (``C`` / ``POSIX`` do not: CJK text gets no trigrams)."""
        lowered = self.ctype.lower().replace("-", "")
        return self.encoding.upper() == "UTF8" and ("utf8" in lowered or lowered == "und")


async def inspect_server(url: str, *, password: str | None = None, timeout: float = 10.0) -> ServerReport:
    """Connect to ``url`` and read what the report holds; ``ReadFailedError`` when that cannot be done."""
    try:
        conn = await asyncpg.connect(url, password=password, timeout=timeout)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError) as error:
        raise ReadFailedError(error) from error  # type: ignore[arg-type]
    try:
        return await _read(conn)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise ReadFailedError(error) from error  # type: ignore[arg-type]
    finally:
        await conn.close(timeout=timeout)


async def _read(conn: asyncpg.Connection) -> ServerReport:
    version = await conn.fetchval("SHOW server_version")
    number = int(await conn.fetchval("SHOW server_version_num"))
    ctype, encoding = await conn.fetchrow(
        "SELECT datctype, pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
    )
    available = {row["name"]: row["installed_version"] is not None for row in await conn.fetch(
        "SELECT name, installed_version FROM pg_available_extensions WHERE name = any($1::text[])", list(EXTENSIONS)
    )}  # fmt: skip
    extensions = {name: (name in available, available.get(name, False)) for name in EXTENSIONS}
    schema_version: int | None
    problem = None
    try:
        schema_version = await migrations.read_version(conn)
    except Exception as error:  # noqa: BLE001 - a SchemaError (tables not ours), said as it is
        schema_version, problem = None, str(error)
    return ServerReport(
        where=await migrations.describe(conn), version=version, major=number // 10000, extensions=extensions,
        ctype=ctype, encoding=encoding, schema_version=schema_version, schema_problem=problem,
    )  # fmt: skip
