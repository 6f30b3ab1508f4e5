"""The README's PostgreSQL recipes, run against a real server: the SQL that creates the role and the database
gives a role that is no superuser everything the gateway's first start needs (its tables, pg_trgm and
unaccent), in a database whose trigram search sees CJK; and the pg_dump / pg_restore commands bring a database
back to the moment of the dump.

The recipes name the role and database ``switchboard``; the test server's superuser has that name already, so
each test runs them with a fresh name in its place, and with the test server's address in place of the README's.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from storage import PostgresStore
from storage.records import NewMessage
from tests.deploy.readme import commands_in, section, shell_blocks
from tests.fakes.postgres_server import PostgresServer

NAME = "switchboard"
"""The role and database the README's recipes create."""
_names = itertools.count(1)


def sql_block() -> str:
    """The README's SQL for the role and database, without psql's interactive commands (``\\password`` asks)."""
    blocks = re.findall(r"^```sql\n(.*?)^```", section("PostgreSQL"), flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "the PostgreSQL section shows one SQL block (the role and the database)"
    return "\n".join(line for line in blocks[0].splitlines() if not line.lstrip().startswith("\\"))


def shell_command(program: str) -> list[str]:
    """The one ``program ...`` command in the PostgreSQL section's shell blocks."""
    lines = [line for block in shell_blocks(section("PostgreSQL")) for line in block.splitlines()]
    found = commands_in(program, lines)
    assert len(found) == 1, f"the PostgreSQL section shows one {program} command, found {found}"
    return found[0]


def against(words: list[str], server: PostgresServer, name: str, dump: Path) -> list[str]:
    """A README command pointed at the test server: its host and port, ``name`` for the role and database,
    ``dump`` for the file."""
    out = [str(server.bindir / words[0])]
    for word in words[1:]:
        if out[-1] == "-h":
            out += ["127.0.0.1", "-p", str(server.port)]
        elif word == NAME:
            out.append(name)
        elif word.endswith(".dump"):
            out.append(str(dump))
        else:
            out.append(word)
    assert "-h" in out, f"{words}: names the server's host"
    return out


def run(command: list[str], stdin: str | None = None) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr}"


@pytest.fixture
def readme_role(postgres: PostgresServer) -> Iterator[str]:
    """The README's role and database, under a fresh name, created by its SQL as the superuser; dropped after."""
    name = f"readme_{os.getpid()}_{next(_names)}"
    psql = [str(postgres.bindir / "psql"), "-h", "127.0.0.1", "-p", str(postgres.port), "-U", NAME, "-d", "postgres",
            "-v", "ON_ERROR_STOP=1", "-X", "-q"]  # fmt: skip
    run(psql, re.sub(rf"\b{NAME}\b", name, sql_block()))
    try:
        yield name
    finally:
        run([*psql, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"])
        run([*psql, "-c", f"DROP ROLE IF EXISTS {name}"])


async def test_the_role_the_readme_creates_migrates_its_database_and_search_sees_cjk(
    postgres: PostgresServer, readme_role: str
) -> None:
    url = f"postgresql://{readme_role}@127.0.0.1:{postgres.port}/{readme_role}"
    store = await PostgresStore.open(url)  # the first start: every table, pg_trgm and unaccent
    await store.close()
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user") is False
        owners = dict(await conn.fetch("SELECT extname, extowner::regrole::text FROM pg_extension"))
        for extension in ("pg_trgm", "unaccent"):
            assert owners.get(extension) == readme_role, f"the owner installed {extension} itself (a trusted extension)"
            assert f"`{extension}`" in section("PostgreSQL"), f"the README names {extension}"
        assert await conn.fetchval("SELECT encoding = pg_char_to_encoding('UTF8') FROM pg_database "
                                   "WHERE datname = current_database()")  # fmt: skip
        assert await conn.fetchval("SELECT show_trgm('日本語の検索')") != [], "LC_CTYPE lets pg_trgm see CJK letters"
        assert await conn.fetchval("SELECT 'ПРИВЕТ мир' ILIKE '%привет%'"), "and case-insensitive matching beyond ASCII"
    finally:
        await conn.close()


async def test_the_readme_dump_and_restore_bring_back_the_moment_of_the_dump(
    postgres: PostgresServer, readme_role: str, tmp_path: Path
) -> None:
    url = f"postgresql://{readme_role}@127.0.0.1:{postgres.port}/{readme_role}"
    dump = tmp_path / "switchboard.dump"
    store = await PostgresStore.open(url)
    try:
        conn = await asyncpg.connect(url)  # the engine's session members are being built: one row by hand
        await conn.execute("INSERT INTO sessions (id, session_key, platform, chat_id, started_at) "
                           "VALUES ('s1', 'telegram:42', 'telegram', '42', 0)")  # fmt: skip
        await conn.close()
        await store.append_messages("s1", [NewMessage(role="user", content="before the dump: 日本語")])

        run(against(shell_command("pg_dump"), postgres, readme_role, dump))
        await store.append_messages("s1", [NewMessage(role="assistant", content="after the dump")])
        await store.close()

        run(against(shell_command("pg_restore"), postgres, readme_role, dump))
        store = await PostgresStore.open(url)
        assert [m.content for m in await store.load_messages("s1")] == ["before the dump: 日本語"]
    finally:
        await store.close()
