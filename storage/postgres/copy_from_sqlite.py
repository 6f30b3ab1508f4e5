"""Copying a SQLite home's database into an empty PostgreSQL database (``switchboard storage migrate``).

    report = await copy_from_sqlite(home / "state.db", "postgresql://switchboard@db.internal/switchboard")

What it does, in order:

1. **Refuses what it must not touch**, before writing anything: a SQLite file another process has
   open (a running gateway: stop it first), a file at another schema version than this build's, a
   PostgreSQL database that holds rows in any table the copy fills, or tables Switchboard did not make.
2. **Brings the target to this build's schema** (``migrations.upgrade``): a new database gets it, one
   that a PostgreSQL store already opened keeps it.
3. **Copies every table in one PostgreSQL transaction**, from one SQLite read transaction (one
   consistent snapshot), with binary ``COPY`` (asyncpg's ``copy_records_to_table``), ids kept as
   they are. Tables go in foreign-key order; a table is one ``COPY`` statement, so a session may
   name a parent stored after it. As ``pg_restore`` does, a table's foreign keys and the indexes
   no constraint needs are dropped before its ``COPY`` and made again after (checked and built
   once over all the rows, far faster than row by row), inside the same transaction.
4. **Moves every identity past the copied ids** (``setval``), so the next row the store adds gets
   the next id up and never collides with a copied one.
5. **Verifies each table before committing**: the row count and a checksum, computed the same way on
   both sides (in Python, over parsed values) and compared. A difference rolls everything back.

What the target holds is what the PostgreSQL store would have written: text and JSON follow the
NUL policy of ``storage/postgres/text.py`` (a NUL becomes U+FFFD), so the checksum of the SQLite
side is taken over the values as cleaned. JSON columns (``jsonb`` here) are compared as parsed JSON:
``jsonb`` reorders keys, drops whitespace and writes numbers its own way (``1e5`` is ``100000``).
The checksum is the sum (mod 2**256) of each row's SHA-256, so it does not depend on the order the
rows come back in (SQLite and PostgreSQL sort text differently).

Which columns are copied comes from the PostgreSQL catalog: every column of the target table that
is not generated (``messages.words`` is), taken from the SQLite column of the same name. SQLite's
own search machinery (``messages_fts``, ``search_words``, ``messages.search_cjk``) is not copied:
PostgreSQL searches with its own, whose vocabulary (``storage/postgres/vocabulary.py``) is made from
the copied messages' words after the copy, in the same transaction. A plain PostgreSQL column with no SQLite counterpart, one the
PostgreSQL store fills itself on insert, is made by a function in :data:`FILLED_BY_STORE`; a column
that is in neither is refused with an error naming it, so a new column is never left empty unseen.

The media files stay in the home's media folder: the database only refers to them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from storage import migrations as sqlite_migrations
from storage.backup import database_in_use
from storage.errors import StorageError
from storage.log import log
from storage.postgres import migrations, vocabulary
from storage.postgres.connection import Connection
from storage.postgres.text import clean, clean_json
from storage.schema import LATEST as SQLITE_LATEST

__all__ = [
    "COPIED_TABLES",
    "FILLED_BY_STORE",
    "CopyError",
    "CopyReport",
    "TableCopy",
    "copy_from_sqlite",
    "without_password",
]

COPIED_TABLES: Final = (
    "prompts",
    "sessions",
    "messages",
    "usage",
    "pairing_codes",
    "pairing_approvals",
    "pairing_failures",
    "inbox",
    "outbox",
)
"""The tables copied, in foreign-key order (a table after those it refers to)."""

Row = Mapping[str, Any]

FILLED_BY_STORE: Final[Mapping[tuple[str, str], Callable[[Row], Any]]] = {
    ("sessions", "last_seq"): lambda row: 0,  # set from the copied messages by _derive
    ("outbox", "claimed_by"): lambda row: None,  # no replica runs yet: every chunk is free for the first to send
}
"""``(table, column)`` -> how to make the value of a PostgreSQL column that SQLite does not have and that the
PostgreSQL store writes itself on insert (a generated column needs nothing here). The function gets the SQLite
row, column name -> value as it goes into PostgreSQL (text already cleaned), and returns the column's value as
the store would write it, say ``("messages", "cjk"): lambda row: cjk_pairs(row["content"])``."""

_COPY_CHUNK: Final = 5_000
"""SQLite rows fetched at a time while a table streams into ``COPY``."""
_VERIFY_PREFETCH: Final = 5_000
"""PostgreSQL rows fetched at a time while a table is read back for its checksum."""
_INDEX_MEMORY: Final = "256MB"
"""``maintenance_work_mem`` while the copy builds the indexes again (the server's default is 64MB)."""
_CHECKSUM_MODULUS: Final = 1 << 256


class CopyError(StorageError):
    """The copy was refused or failed, and nothing of it was kept; the message says what to do."""


@dataclass(frozen=True, slots=True)
class TableCopy:
    """One table copied and verified: its rows, the checksum both sides agreed on, where its ids go on."""

    table: str
    rows: int
    checksum: str
    """Hex of the order-independent checksum over the rows' parsed values (the same on both sides)."""
    next_id: int | None
    """The id the next row the store adds will get; None for a table without an identity."""
    seconds: float


@dataclass(frozen=True, slots=True)
class CopyReport:
    """What ``copy_from_sqlite`` did."""

    source: Path
    source_version: int
    target: str
    """The database as an operator knows it (``postgresql://user@host:port/db``; never a password)."""
    target_version: int
    tables: tuple[TableCopy, ...]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(table.rows for table in self.tables)


async def copy_from_sqlite(
    source: Path, url: str, *, password: str | None = None, connect_timeout: float = 10.0
) -> CopyReport:
    """Copy the SQLite database ``source`` into the empty PostgreSQL database at ``url`` and verify it (see the module
    docstring). ``url`` is a libpq URL; the password comes from ``password``, the URL or ``PGPASSWORD``, never shown.
    ``CopyError`` when refused or failed (nothing kept); ``SchemaError`` for a target this build cannot use."""
    started = time.perf_counter()
    if not source.is_file():
        raise CopyError(f"there is no SQLite database at {source}: name the one to copy with --from")
    if database_in_use(source):
        raise CopyError(f"{source} is open in another process (a running gateway?): stop the gateway "
                        "(systemctl stop switchboard, docker compose stop), then migrate again")  # fmt: skip
    with _Snapshot(source) as snapshot:
        source_version = _source_version(snapshot, source)
        conn = await _connect(url, password, connect_timeout)
        try:
            where = await migrations.describe(conn)
            if await migrations.read_version(conn):  # tables that are not Switchboard's raise SchemaError here
                await _refuse_unless_empty(conn, where)
            target_version = await migrations.upgrade(conn)
            async with conn.transaction():
                # Another copy started at the same moment waits here, then finds the rows and is refused.
                await conn.execute(f"LOCK TABLE {', '.join(COPIED_TABLES)} IN ACCESS EXCLUSIVE MODE")
                await _refuse_unless_empty(conn, where)
                await conn.execute(f"SET LOCAL maintenance_work_mem = '{_INDEX_MEMORY}'")  # for building the indexes
                tables = tuple([await _copy_table(conn, snapshot, table, where) for table in COPIED_TABLES])
                await _derive(conn)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as error:
            raise CopyError(f"the copy into {without_password(url)} failed and was rolled back, nothing of it was "
                            f"kept: {_masked(str(error), url)}") from error  # fmt: skip
        finally:
            await conn.close()
    report = CopyReport(source, source_version, where, target_version, tables, time.perf_counter() - started)
    log.info("storage.copied_from_sqlite", source=str(source), database=where, rows=report.rows,
             tables={t.table: t.rows for t in tables}, ms=round(report.seconds * 1000, 1))  # fmt: skip
    return report


def without_password(url: str) -> str:
    """``url`` with any password taken out (in the user part or as a ``password`` parameter), for showing it."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# -- the SQLite side -------------------------------------------------------------------------------


class _Snapshot:
    """A read-only connection to the SQLite file holding one read transaction for the whole copy."""

    def __init__(self, path: Path) -> None:
        try:
            self.conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
            self.conn.execute("PRAGMA query_only = ON")
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        except sqlite3.Error as error:
            raise CopyError(f"cannot read {path}: {error}") from error

    def __enter__(self) -> _Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()  # the read transaction ends with it; nothing was written

    def columns(self, table: str) -> list[str]:
        return [row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")]

    def rows(self, table: str, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        cursor = self.conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid")  # noqa: S608
        while chunk := cursor.fetchmany(_COPY_CHUNK):
            yield from chunk


def _source_version(snapshot: _Snapshot, path: Path) -> int:
    try:
        version = sqlite_migrations.read_version(snapshot.conn)
    except StorageError as error:
        raise CopyError(f"{path} cannot be copied: {error}") from error
    if version == 0:
        raise CopyError(f"{path} is an empty database: there is nothing to copy")
    if version > SQLITE_LATEST:
        raise CopyError(f"{path} is at schema version {version}, newer than this build's {SQLITE_LATEST}: "
                        "migrate it with the build that wrote it")  # fmt: skip
    if version < SQLITE_LATEST:
        raise CopyError(f"{path} is at schema version {version}, this build copies version {SQLITE_LATEST}: open it "
                        "once with this build first (`switchboard sessions list` upgrades it), then migrate again")  # fmt: skip
    return version


# -- the PostgreSQL side ---------------------------------------------------------------------------


async def _connect(url: str, password: str | None, timeout: float) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(url, timeout=timeout, **({"password": password} if password else {}))
    except (OSError, TimeoutError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        reason = _masked(str(error) or type(error).__name__, url)
        raise CopyError(f"cannot connect to {without_password(url)}: {reason}. Check the URL, that the server "
                        "runs, and the password (PGPASSWORD)") from None  # fmt: skip


async def _derive(conn: Connection) -> None:
    """What the PostgreSQL store keeps from other rows, made from the copied rows: each session's ``last_seq`` (the
    ``seq`` of its last message, which an append numbers on from), and the vocabulary of the messages' words."""
    await conn.execute(
        "UPDATE sessions AS s SET last_seq = m.last FROM "
        "(SELECT session_id, max(seq) AS last FROM messages GROUP BY session_id) AS m WHERE s.id = m.session_id"
    )
    await vocabulary.fill(conn)


async def _refuse_unless_empty(conn: Connection, where: str) -> None:
    present = {table: await conn.fetchval(f"SELECT count(*) FROM {table}") for table in COPIED_TABLES}  # noqa: S608
    held = {table: count for table, count in present.items() if count}
    if held:
        listed = ", ".join(f"{table} {count:,} rows" for table, count in held.items())
        raise CopyError(f"{where} is not empty ({listed}): the copy goes only into an empty database, and nothing "
                        "was written. Create a new database for it (createdb), or drop and create this one "
                        "again if what it holds is not needed")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    kind: str
    """``text``, ``json``, ``int`` or ``float``: how a value is converted and checksummed."""
    identity: bool


_KINDS: Final = {
    "text": "text",
    "jsonb": "json",
    "bigint": "int",
    "integer": "int",
    "smallint": "int",
    "double precision": "float",
}


async def _target_columns(conn: Connection, table: str) -> list[_Column]:
    rows = await conn.fetch(
        "SELECT attname, format_type(atttypid, atttypmod) AS type, attgenerated <> '' AS generated, "
        "attidentity <> '' AS identity FROM pg_attribute "
        "WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        table,
    )
    columns = []
    for row in rows:
        if row["generated"]:
            continue
        kind = _KINDS.get(row["type"])
        if kind is None:
            raise CopyError(f"{table}.{row['attname']} is of type {row['type']}, which this build cannot copy into")
        columns.append(_Column(row["attname"], kind, row["identity"]))
    return columns


async def _copy_table(conn: Connection, snapshot: _Snapshot, table: str, where: str) -> TableCopy:
    started = time.perf_counter()
    columns = await _target_columns(conn, table)
    present = set(snapshot.columns(table))
    missing = [c.name for c in columns if c.name not in present and (table, c.name) not in FILLED_BY_STORE]
    if missing:
        raise CopyError(f"{table}.{', '.join(missing)} in PostgreSQL has no column in SQLite to copy from: this "
                        "build does not know how to fill it (FILLED_BY_STORE in storage/postgres/copy_from_sqlite.py)")  # fmt: skip
    read = [name for name in (c.name for c in columns) if name in present]
    expected = _Checksum()

    def records() -> Iterator[tuple[Any, ...]]:
        for raw in snapshot.rows(table, read):
            row = dict(zip(read, raw))
            for c in columns:
                row[c.name] = _stored(c.kind, row[c.name] if c.name in present else FILLED_BY_STORE[(table, c.name)](row))
            values = tuple(row[c.name] for c in columns)
            expected.add(columns, values)
            yield values

    set_aside = await _set_aside(conn, table)
    await conn.copy_records_to_table(table, records=records(), columns=[c.name for c in columns])
    for statement in set_aside:
        await conn.execute(statement)
    next_id = await _advance_identity(conn, table, columns)
    found = await _read_back(conn, table, columns)
    if (found.rows, found.digest) != (expected.rows, expected.digest):
        raise CopyError(f"{table} in {where} does not match the SQLite database after the copy ({expected.rows:,} "
                        f"rows there, {found.rows:,} here; checksums {expected.hex} and {found.hex}): it was rolled "
                        "back and nothing was kept. Please report this, with both databases' versions")  # fmt: skip
    return TableCopy(table, expected.rows, expected.hex, next_id, time.perf_counter() - started)


async def _set_aside(conn: Connection, table: str) -> list[str]:
    """Drop the table's foreign keys and the indexes no constraint needs; the statements that make them again.

    As ``pg_restore`` does: checked once over all the rows (one join) and built once (a GIN index over words or
    trigrams), they take a fraction of the time they take kept up row by row during the ``COPY``.
    """
    keys = await conn.fetch(
        "SELECT quote_ident(conname) AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint "
        "WHERE conrelid = to_regclass($1) AND contype = 'f' ORDER BY conname",
        table,
    )
    indexes = await conn.fetch(
        "SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i "
        "WHERE i.indrelid = to_regclass($1) AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
        table,
    )  # fmt: skip
    for key in keys:
        await conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {key['name']}")
    for index in indexes:
        await conn.execute(f"DROP INDEX {index['name']}")
    return [*(index["definition"] for index in indexes),
            *(f"ALTER TABLE {table} ADD CONSTRAINT {key['name']} {key['definition']}" for key in keys)]  # fmt: skip


async def _advance_identity(conn: Connection, table: str, columns: Sequence[_Column]) -> int | None:
    """Set the identity's sequence to the largest copied id, so the store's next row gets the one after it."""
    identity = next((c.name for c in columns if c.identity), None)
    if identity is None:
        return None
    last = await conn.fetchval(f"SELECT max({identity}) FROM {table}")  # noqa: S608
    if last is None:
        return 1
    await conn.execute("SELECT setval(pg_get_serial_sequence($1, $2), $3)", table, identity, last)
    return int(last) + 1


async def _read_back(conn: Connection, table: str, columns: Sequence[_Column]) -> _Checksum:
    selected = ", ".join(f"{c.name}::text" if c.kind == "json" else c.name for c in columns)
    found = _Checksum()
    async for record in conn.cursor(f"SELECT {selected} FROM {table}", prefetch=_VERIFY_PREFETCH):  # noqa: S608
        found.add(columns, tuple(record))
    count = await conn.fetchval(f"SELECT count(*) FROM {table}")  # noqa: S608
    if count != found.rows:
        found.rows = -1  # cannot happen inside one transaction; never let it pass as verified
    return found


# -- values and the checksum -----------------------------------------------------------------------


def _stored(kind: str, value: Any) -> Any:
    """A SQLite value as the PostgreSQL store would hold it."""
    if value is None:
        return None
    if kind == "text":
        return clean(value if isinstance(value, str) else str(value))
    if kind == "json":
        return clean_json(value if isinstance(value, str) else str(value))
    if kind == "int":
        return int(value)
    return float(value)


class _Checksum:
    """Rows counted and hashed in any order: the sum of each row's SHA-256 over its canonical cells."""

    def __init__(self) -> None:
        self.rows = 0
        self.digest = 0

    def add(self, columns: Sequence[_Column], values: Sequence[Any]) -> None:
        cells = [None if v is None else _canonical_json(v) if c.kind == "json" else v for c, v in zip(columns, values)]
        line = json.dumps(cells, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self.digest = (self.digest + int.from_bytes(hashlib.sha256(line).digest(), "big")) % _CHECKSUM_MODULUS
        self.rows += 1

    @property
    def hex(self) -> str:
        return f"{self.digest:064x}"


def _canonical_json(text: str) -> str:
    """JSON text as one canonical string of its parsed value: keys sorted, no spaces, numbers as exact decimals
    (so ``1e5``, ``100000`` and ``100000.0`` agree, as they do once ``jsonb`` has read them)."""
    return _canonical(json.loads(text, parse_float=Decimal, parse_int=Decimal))


def _canonical(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_canonical(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return "0" if value == 0 else str(value.normalize())
    return json.dumps(value, ensure_ascii=False)


def _masked(text: str, url: str) -> str:
    """``text`` with the URL's password (if it has one) replaced, for error messages."""
    parts = urlsplit(url)
    text = text.replace(url, without_password(url))
    for secret in filter(None, [parts.password, *(v for k, v in parse_qsl(parts.query) if k == "password")]):
        text = text.replace(secret, "***")
    return text
