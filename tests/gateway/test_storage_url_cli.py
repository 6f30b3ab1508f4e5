"""``storage.url`` as an operator meets it: ``switchboard check`` and ``doctor`` against a real PostgreSQL server
(reachable, refusing a wrong password, not listening), never showing the password."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from storage.postgres.schema import LATEST as POSTGRES_LATEST
from tests.fakes.postgres_server import PostgresServer
from tests.gateway.processes import switchboard

PASSWORD = "s3cret-Horse-battery"
ROLE = "sb_guarded"


def write_config(home: Path, url: str, **storage: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    lines = [f"  {key}: {value}" for key, value in {"url": url, **storage}.items()]
    (home / "config.yaml").write_text("storage:\n" + "\n".join(lines) + "\n", encoding="utf-8")


def as_role(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, f"{role}@{parts.hostname}:{parts.port}", parts.path, parts.query, ""))


@pytest.fixture
def guarded_dsn(postgres: PostgresServer, postgres_dsn: str) -> Iterator[str]:
    """The test's database as a role the server lets in only with ``PASSWORD`` (scram-sha-256 in pg_hba.conf)."""
    assert postgres.base is not None
    hba = postgres.base / "data" / "pg_hba.conf"
    original = hba.read_text()

    async def setup(statements: list[str]) -> None:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n{original}")
    database = urlsplit(postgres_dsn).path.lstrip("/")
    asyncio.run(setup([f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'",
                       f"GRANT ALL ON DATABASE {database} TO {ROLE}", f"GRANT ALL ON SCHEMA public TO {ROLE}",
                       "SELECT pg_reload_conf()"]))  # fmt: skip
    try:
        yield as_role(postgres_dsn, ROLE)
    finally:
        hba.write_text(original)
        asyncio.run(setup([f"DROP OWNED BY {ROLE}", f"DROP ROLE {ROLE}", "SELECT pg_reload_conf()"]))


def test_check_says_postgresql_answers_with_its_version_and_schema(tmp_path: Path, postgres_dsn: str) -> None:
    write_config(tmp_path, postgres_dsn)
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x")
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.strip().startswith("database"))
    assert f"PostgreSQL, {postgres_dsn}" in line
    assert "PostgreSQL 15" in line and "answers" in line
    assert "pg_trgm, unaccent offered" in line and "the database is empty" in line


def test_doctor_reports_the_server_version_extensions_and_schema(tmp_path: Path, postgres_dsn: str) -> None:
    write_config(tmp_path, postgres_dsn)
    asyncio.run(_open_and_close(postgres_dsn))  # as `switchboard run` leaves it: migrated
    done = switchboard("doctor", home=tmp_path, ANTHROPIC_API_KEY="sk-ant-x")
    line = next(line for line in done.stdout.splitlines() if line.split()[1:2] == ["database"])
    assert line.startswith("ok    database  PostgreSQL 15"), done.stdout
    assert "pg_trgm, unaccent installed" in line and f"schema version {POSTGRES_LATEST} (current)" in line
    assert "LC_CTYPE" not in line  # the test server's database is C.UTF-8


async def _open_and_close(dsn: str) -> None:
    from storage import open_store  # noqa: PLC0415

    store = await open_store(dsn)
    await store.close()


def test_a_wrong_password_is_a_clear_error_that_never_shows_the_password(tmp_path: Path, guarded_dsn: str) -> None:
    write_config(tmp_path, guarded_dsn)
    wrong = "not-the-" + PASSWORD
    for command in ("check", "doctor"):
        done = switchboard(command, home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x", PGPASSWORD=wrong)
        assert done.returncode != 0, done.stdout
        assert "password authentication failed" in done.stdout
        assert "PGPASSWORD" in done.stdout  # says where the password is set
        assert wrong not in done.stdout + done.stderr and PASSWORD not in done.stdout + done.stderr
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x", PGPASSWORD=PASSWORD)
    assert done.returncode == 0, done.stdout
    assert "password from PGPASSWORD" in done.stdout and PASSWORD not in done.stdout


def test_an_unreachable_server_is_named_with_what_to_do(tmp_path: Path) -> None:
    from tests.fakes.postgres_server import free_port  # noqa: PLC0415

    url = f"postgresql://switchboard@127.0.0.1:{free_port()}/switchboard"
    write_config(tmp_path, url, password="${SB_DB_PASSWORD}")
    done = switchboard("check", home=tmp_path, TELEGRAM_BOT_TOKEN="1:x", ANTHROPIC_API_KEY="sk-ant-x",
                       SB_DB_PASSWORD=PASSWORD)  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert f"PostgreSQL at {url} does not answer" in done.stdout
    assert "pg_isready -h 127.0.0.1" in done.stdout and "Not ready to run" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr
    done = switchboard("doctor", home=tmp_path, ANTHROPIC_API_KEY="sk-ant-x", SB_DB_PASSWORD=PASSWORD)
    assert "FAIL  database  PostgreSQL at" in done.stdout and PASSWORD not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://sb@db/switchboard", "the engine 'mysql'"),
        (f"postgresql://sb:{PASSWORD}@db/switchboard", "holds a password"),
        ("postgresql://sb@db/switchboard?sslmode=sometimes", "sslmode must be one of disable, allow, prefer"),
        ("postgresql://sb@db", "names no database"),
        (f"postgresql://sb@db/switchboard?password={PASSWORD}", "'password' cannot be set in the URL"),
    ],
)
def test_a_bad_url_says_what_is_wrong_and_the_accepted_forms(tmp_path: Path, url: str, says: str) -> None:
    write_config(tmp_path, url)
    done = switchboard("check", home=tmp_path, ANTHROPIC_API_KEY="sk-ant-x")
    assert done.returncode == 2
    assert f"storage.url: " in done.stderr and says in done.stderr, done.stderr
    assert PASSWORD not in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_backup_and_restore_point_at_pg_dump_for_a_postgresql_database(tmp_path: Path, command: str) -> None:
    url = "postgresql://switchboard@db.internal:5432/switchboard?sslmode=require"
    write_config(tmp_path / "home", url)
    done = switchboard(command, str(tmp_path / "backups"), home=tmp_path / "home", PGPASSWORD=PASSWORD)
    assert done.returncode == 1
    tool = "pg_dump --format=custom" if command == "backup" else "pg_restore --clean --if-exists --no-owner"
    assert f"{tool} --dbname='{url}'" in done.stderr, done.stderr
    assert "nothing was done" in done.stderr and PASSWORD not in done.stdout + done.stderr
    assert not (tmp_path / "backups").exists()
