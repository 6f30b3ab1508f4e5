"""``storage.url``: which engine holds the data, and where.

Two forms are accepted:

* a path, or ``sqlite:///path``: SQLite, one file (a relative path is inside the home directory;
  ``sqlite:////var/lib/switchboard/state.db`` is absolute, as in SQLAlchemy's URLs);
* ``postgresql://user@host[:port]/database[?sslmode=...]`` (``postgres://`` too): PostgreSQL.

The password never goes in the URL (it would sit in config.yaml and in every message that names the
database): it comes from ``storage.password``, which is read from ``PGPASSWORD`` (the environment,
then the home's ``.env``) when unset, and is masked like every other secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = ["ACCEPTED_FORMS", "SSL_MODES", "StorageUrl", "StorageUrlError", "parse_storage_url"]

SSL_MODES: Final = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
"""libpq's ``sslmode`` values, which asyncpg honours the same way."""
QUERY_KEYS: Final = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "target_session_attrs", "application_name")
"""What the URL's query may set: the TLS settings and two harmless connection settings (the driver would send
anything else to the server as a setting, which the server then refuses)."""
ACCEPTED_FORMS: Final = (
    "a path or sqlite:///state.db for SQLite (relative to the home directory), "
    "or postgresql://user@host:5432/database?sslmode=require for PostgreSQL"
)


class StorageUrlError(ValueError):
    """``storage.url`` cannot be used; the message says why and what would do (never a password)."""


@dataclass(frozen=True, slots=True)
class StorageUrl:
    """A parsed ``storage.url``."""

    engine: Literal["sqlite", "postgresql"]
    target: str
    """SQLite: the file's path as written (relative to the home unless absolute). PostgreSQL: the URL as written
    (it holds no password: one in the URL is refused)."""


def parse_storage_url(raw: str) -> StorageUrl:
    """The engine and place ``raw`` names, or :class:`StorageUrlError` saying what is wrong and what would do."""
    text = raw.strip()
    if not text:
        raise StorageUrlError(f"is empty; set {ACCEPTED_FORMS}, or remove the key for SQLite in the home directory")
    scheme, has_scheme, _ = text.partition("://")
    if not has_scheme:
        if text.lower().startswith("sqlite:"):
            raise StorageUrlError(f"{text!r} is not a SQLite URL: write sqlite:///state.db (three slashes, then the path)")
        return StorageUrl("sqlite", text)
    scheme = scheme.lower()
    if scheme == "sqlite":
        path = text[len("sqlite://"):]
        if not path.startswith("/") or len(path) < 2:
            raise StorageUrlError(f"{text!r} names no file: write sqlite:///state.db (three slashes, then the path; "
                                  "four for an absolute path: sqlite:////var/lib/switchboard/state.db)")
        return StorageUrl("sqlite", path[1:])
    if scheme in ("postgresql", "postgres"):
        return StorageUrl("postgresql", _checked_postgresql(text))
    raise StorageUrlError(f"the engine {scheme!r} ({_masked(text)}) is not supported; set {ACCEPTED_FORMS}")


def _checked_postgresql(text: str) -> str:
    parts = urlsplit(text)
    if parts.password is not None:
        raise StorageUrlError(
            f"{_masked(text)} holds a password: take it out of the URL and set PGPASSWORD (in the environment or "
            "the home's .env), or storage.password: ${VARIABLE}"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise StorageUrlError(f"{text!r}: the port must be a number from 1 to 65535") from None
    database = parts.path.lstrip("/")
    if not database or "/" in database:
        raise StorageUrlError(f"{text!r} names no database: end it with /DATABASE (postgresql://user@host:5432/switchboard)")
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in QUERY_KEYS:
            raise StorageUrlError(f"{_masked(text)}: {key!r} cannot be set in the URL; it may set {', '.join(QUERY_KEYS)}"
                                  + (" (the password comes from PGPASSWORD or storage.password)" if "pass" in key else ""))
        if key == "sslmode" and value not in SSL_MODES:
            raise StorageUrlError(f"{text!r}: sslmode must be one of {', '.join(SSL_MODES)}, got {value!r}")
    return text


def _masked(text: str) -> str:
    """``text`` with what may be a password (in the authority, or a ``password=`` parameter) replaced by ``***``."""
    parts = urlsplit(text)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = "&".join(f"{key}=***" if "pass" in key else f"{key}={value}"
                     for key, value in parse_qsl(parts.query, keep_blank_values=True))  # fmt: skip
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
