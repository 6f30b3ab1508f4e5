"""The database check when ``storage.url`` names a PostgreSQL server (``check`` and ``doctor`` both show it).

It connects once and says whether the server answers, its version (``MIN_SERVER_VERSION`` and up are
supported, ``TESTED_SERVER_VERSION`` is what the tests run on), whether the extensions the schema needs
are offered and installed, whether the database's character type lets search find CJK text, and the
schema version against this build's. A server that does not answer gets the reason and what to do; the
password is never in what it says (the URL holds none, and the driver's messages quote none).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from config.loader import LoadedConfig
from gateway.operations.doctor.results import Check
from storage import (
    MIN_SERVER_VERSION,
    TESTED_SERVER_VERSION,
    ReadFailedError,
    ServerReport,
    inspect_server,
)

NAME = "database"


async def server_database_check(loaded: LoadedConfig) -> Check:
    """Ask the configured PostgreSQL server what the check says."""
    url = loaded.database_url
    try:
        report = await inspect_server(url, password=loaded.settings.storage.password)
    except ReadFailedError as error:
        return Check.fail(NAME, f"PostgreSQL at {url} does not answer: {error.cause}", _fix_for(error.cause, url))
    return report_check(report)


def report_check(report: ServerReport) -> Check:
    """The check of a server that answered."""
    head = f"PostgreSQL {report.version} at {report.where} answers"
    if not report.supported:
        return Check.fail(NAME, f"{head}, but version {report.major} is older than {MIN_SERVER_VERSION}",
                          f"upgrade the server to PostgreSQL {MIN_SERVER_VERSION} or newer "
                          f"({TESTED_SERVER_VERSION} is what Switchboard is tested on)")  # fmt: skip
    if report.schema_problem is not None:
        return Check.fail(NAME, f"{head}, but {report.schema_problem}",
                          "point storage.url at an empty database, or one Switchboard created")  # fmt: skip
    version = report.schema_version
    if version is not None and version > report.build_version:
        return Check.fail(NAME, f"{head}, but its schema version {version} is newer than this build's "
                          f"({report.build_version})", "upgrade Switchboard, or point storage.url at another database")  # fmt: skip
    missing = [name for name, (available, _) in report.extensions.items() if not available]
    if missing:
        return Check.fail(NAME, f"{head}, but it does not offer the extension {', '.join(missing)}",
                          "install the server's contrib package (Debian: postgresql-contrib, part of postgresql-15), "
                          "then `switchboard run` creates the extension")  # fmt: skip
    parts = [head]
    parts.append(_extensions_line(report))
    if version == 0:
        parts.append(f"the database is empty (`switchboard run` creates schema version {report.build_version})")
    elif version == report.build_version:
        parts.append(f"schema version {version} (current)")
    else:
        parts.append(f"schema version {version} (migrated to {report.build_version} on the next start)")
    if not report.utf8_ctype:
        parts.append(
            f"warning: the database's LC_CTYPE is {report.ctype!r} ({report.encoding}), so search cannot find words of "
            "Chinese, Japanese or Korean text by their parts; create the database with a UTF-8 ctype "
            "(`createdb --encoding UTF8 --locale C.UTF-8 --template template0 NAME`) and move the data there "
            "(`switchboard storage migrate`)"
        )
    return Check.ok(NAME, "; ".join(parts))


def _extensions_line(report: ServerReport) -> str:
    installed = [name for name, (_, done) in report.extensions.items() if done]
    offered = [name for name, (_, done) in report.extensions.items() if not done]
    words = []
    if installed:
        words.append(f"{', '.join(installed)} installed")
    if offered:
        words.append(f"{', '.join(offered)} offered (created on the next start; the role needs CREATE on the database)")
    return "extensions: " + "; ".join(words)


def _fix_for(cause: BaseException, url: str) -> str:
    """What to do about a server that did not answer, by what it said."""
    state = getattr(cause, "sqlstate", None)
    parts = urlsplit(url)
    user, database = parts.username or "the user", parts.path.lstrip("/")
    if state in ("28P01", "28000"):
        return (f"set the password of the role {user} in PGPASSWORD (in the environment or the home's .env) or in "
                "storage.password, and check the server's pg_hba.conf lets the role in from here")  # fmt: skip
    if state == "3D000":
        return f"create the database: `createdb --owner {user} --encoding UTF8 --locale C.UTF-8 --template template0 {database}`"
    if "ssl" in str(cause).lower():
        return "make sslmode in storage.url match what the server offers (disable, prefer, require, verify-ca, verify-full)"
    where = f"-h {parts.hostname or 'localhost'} -p {parts.port or 5432}"
    return f"start the server, or correct the host and port in storage.url (`pg_isready {where}` tells when it answers)"
