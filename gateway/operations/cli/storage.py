"""``switchboard storage``: the database engine behind the home.

    switchboard storage migrate --to postgresql://switchboard@db.internal/switchboard [--from PATH]

``migrate`` copies the home's SQLite database (storage.path, or ``--from PATH``) into an empty
PostgreSQL database: sessions, their lineage and titles, messages, usage, pairing, inbox and
outbox, ids kept; then checks every table (row count and checksum) and prints what it copied.
The password comes from the URL or ``PGPASSWORD`` (the environment, or the home's .env) and is
never printed. The gateway must be stopped: a database another process has open is refused.
The SQLite file is only read, and the media files stay in the home's media folder. The copy
itself is ``storage/postgres/copy_from_sqlite.py``.
Exit status: 0 copied and verified, 1 refused or failed (nothing kept), 2 for configuration errors.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from config.home import resolve_home
from config.loader import home_environment

from gateway.operations.cli.common import add_config_option, load_config_or_exit, log_warnings_to_stderr, show
from storage import CopyReport, StorageError, copy_from_sqlite, without_password

EXIT_FAILED = 1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "storage",
        help="move the home's database to another engine (PostgreSQL)",
        description="Work on the database engine behind the home.",
    )
    commands = parser.add_subparsers(dest="storage_command", metavar="COMMAND", required=True)
    migrate = commands.add_parser(
        "migrate",
        help="copy the SQLite database into an empty PostgreSQL database (the gateway must be stopped)",
        description="Copy the home's SQLite database into an empty PostgreSQL database, ids kept, and verify "
        "every table. The password comes from PGPASSWORD (or the URL).",
    )
    migrate.add_argument("--to", required=True, metavar="URL", dest="url",
                         help="the PostgreSQL database, postgresql://user@host:port/database[?sslmode=...]")  # fmt: skip
    migrate.add_argument("--from", metavar="PATH", type=Path, default=None, dest="source",
                         help="the SQLite file to copy (default: the home's, storage.path)")  # fmt: skip
    add_config_option(migrate)
    migrate.set_defaults(handler=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    source = args.source if args.source is not None else load_config_or_exit(args).db_path
    log_warnings_to_stderr()
    try:
        report = asyncio.run(copy_from_sqlite(source, args.url, password=_password(args.url)))
    except StorageError as error:
        show(f"switchboard storage migrate: {error}", sys.stderr)
        return EXIT_FAILED
    show(describe(report, without_password(args.url)))
    return 0


def _password(url: str) -> str | None:
    """``PGPASSWORD`` from the home's .env, when neither the URL nor the environment gives one (the driver reads
    those itself; .env is Switchboard's own)."""
    if urlsplit(url).password or os.environ.get("PGPASSWORD"):
        return None
    return home_environment(resolve_home(os.environ)).get("PGPASSWORD") or None


def describe(report: CopyReport, url: str) -> str:
    """What the copy did, for the operator: each table, the time, and what to do next."""
    width = max(len(f"{t.rows:,}") for t in report.tables)
    lines = [
        f"Copied {report.source} (SQLite, schema version {report.source_version}) into {report.target} "
        f"(PostgreSQL, schema version {report.target_version}) in {report.seconds:.1f} s:"
    ]
    for table in report.tables:
        ids = f"; new ids from {table.next_id:,}" if table.next_id is not None else ""
        lines.append(f"  {table.table:<18} {table.rows:>{width},} rows copied, verified (count and checksum){ids}")
    lines += [
        f"{report.rows:,} rows in all. The SQLite database is unchanged; the media files stay in the home's media folder.",
        f"Next: set storage.url to {url} in config.yaml (the password in PGPASSWORD, in .env, never in the file), "
        "then start the gateway.",
    ]
    return "\n".join(lines)
