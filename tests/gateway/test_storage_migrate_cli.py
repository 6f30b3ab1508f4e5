"""``switchboard storage migrate --to postgresql://...`` as a subprocess, against a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from config.home import ensure_home
from config.loader import example_config_text
from storage.postgres.schema import LATEST as POSTGRES_LATEST
from storage.schema import LATEST as SQLITE_LATEST
from tests.gateway.processes import switchboard
from tests.storage.postgres.sqlite_home import fill, postgres_rows, sqlite_rows

LOCK_HOLDER = Path(__file__).parents[1] / "storage" / "lock_holder.py"
SECRET = "pw-7Hq2-not-for-the-screen"


def make_home(home: Path) -> None:
    ensure_home(home, config_template=example_config_text())
    asyncio.run(fill(home / "state.db"))


def test_migrate_copies_the_home_says_what_it_did_and_refuses_a_second_run(tmp_path: Path, postgres_dsn: str) -> None:
    home = tmp_path / "home"
    make_home(home)
    url = postgres_dsn.replace("switchboard@", f"switchboard:{SECRET}@")  # the test server trusts; the URL may still hold one

    done = switchboard("storage", "migrate", "--to", url, home=home)

    assert done.returncode == 0, done.stderr
    database = postgres_dsn.rsplit("/", 1)[1]
    assert re.search(rf"^Copied {re.escape(str(home / 'state.db'))} \(SQLite, schema version {SQLITE_LATEST}\) into "
                     rf"postgresql://switchboard@127\.0\.0\.1:\d+/{database} \(PostgreSQL, schema version {POSTGRES_LATEST}\) in \d+\.\d s:$",
                     done.stdout, re.MULTILINE), done.stdout  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[1:10] == [
        "  prompts            3 rows copied, verified (count and checksum); new ids from 4",
        "  sessions           3 rows copied, verified (count and checksum)",
        "  messages           9 rows copied, verified (count and checksum); new ids from 10",
        "  usage              3 rows copied, verified (count and checksum); new ids from 4",
        "  pairing_codes      2 rows copied, verified (count and checksum)",
        "  pairing_approvals  1 rows copied, verified (count and checksum)",
        "  pairing_failures   2 rows copied, verified (count and checksum); new ids from 3",
        "  inbox              3 rows copied, verified (count and checksum); new ids from 4",
        "  outbox             3 rows copied, verified (count and checksum); new ids from 4",
    ]
    assert lines[10:] == [
        "29 rows in all. The SQLite database is unchanged; the media files stay in the home's media folder.",
        f"Next: set storage.url to {postgres_dsn} in config.yaml (the password in PGPASSWORD, in .env, never in the "
        "file), then start the gateway.",
    ]
    assert SECRET not in done.stdout + done.stderr
    assert asyncio.run(postgres_rows(postgres_dsn)) == sqlite_rows(home / "state.db")

    again = switchboard("storage", "migrate", "--to", url, home=home)
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr.startswith(f"switchboard storage migrate: postgresql://switchboard@127.0.0.1:")
    assert "is not empty (prompts 3 rows, sessions 3 rows, messages 9 rows, usage 3 rows, " in again.stderr
    assert "the copy goes only into an empty database, and nothing was written" in again.stderr
    assert SECRET not in again.stdout + again.stderr


def test_migrate_refuses_while_the_database_is_open_elsewhere(tmp_path: Path, postgres_dsn: str) -> None:
    home = tmp_path / "home"
    make_home(home)
    holder = subprocess.Popen([sys.executable, str(LOCK_HOLDER), str(home / "state.db"), "-"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        refused = switchboard("storage", "migrate", "--to", postgres_dsn, home=home)
    finally:
        holder.communicate("\n")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"switchboard storage migrate: {home / 'state.db'} is open in another process (a running gateway?): stop the "
        "gateway (systemctl stop switchboard, docker compose stop), then migrate again"
    )


def test_migrate_from_another_file_and_a_server_that_does_not_answer(tmp_path: Path, postgres_dsn: str) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "copy" / "old-state.db"
    ensure_home(home, config_template=example_config_text())
    elsewhere.parent.mkdir()
    asyncio.run(fill(elsewhere))
    port = postgres_dsn.rsplit(":", 1)[1].split("/")[0]

    down = switchboard("storage", "migrate", "--from", str(elsewhere), "--to",
                       postgres_dsn.replace(f":{port}/", ":1/").replace("switchboard@", f"switchboard:{SECRET}@"),
                       home=home)  # fmt: skip
    assert down.returncode == 1
    assert down.stderr.startswith("switchboard storage migrate: cannot connect to postgresql://switchboard@127.0.0.1:1/")
    assert "Check the URL, that the server runs, and the password (PGPASSWORD)" in down.stderr
    assert SECRET not in down.stderr

    done = switchboard("storage", "migrate", "--from", str(elsewhere), "--to", postgres_dsn, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Copied {elsewhere} (SQLite, schema version {SQLITE_LATEST})")
    assert not (home / "state.db").exists(), "the home's own database was not touched"
