"""``switchboard backup`` and ``restore`` as subprocesses, with another process writing to the database."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

from agent.memory import MemoryTarget
from agent.memory_scopes import MemoryBank, MemoryScope
from config.home import ensure_home
from config.loader import example_config_text
from storage import SCHEMA_VERSION, Store
from tests.gateway.processes import switchboard
from tests.storage.test_backup import Writer, seqs


ALICE = MemoryScope.person("telegram", "42")


def make_home(home: Path) -> None:
    ensure_home(home, config_template=example_config_text())
    MemoryBank(home / "memories").store(ALICE).add(MemoryTarget.USER, "Prefers short answers.")
    (home / "memories" / "shared").mkdir(mode=0o700)
    (home / "memories" / "shared" / "MEMORY.md").write_text("Support hours are 9 to 5.\n", encoding="utf-8")
    (home / "memories" / "shared" / "MEMORY.md").chmod(0o600)
    (home / "SOUL.md").write_text("You are terse.\n", encoding="utf-8")
    (home / "SOUL.md").chmod(0o600)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_backup_while_writing_then_restore_round_trip(tmp_path: Path) -> None:
    home, backups = tmp_path / "home", tmp_path / "backups"
    make_home(home)
    writer = Writer(home / "state.db")
    try:
        writer.wait_for_seq(200)
        done = switchboard("backup", str(backups), home=home)
        assert done.returncode == 0, done.stderr
        (made,) = backups.iterdir()
        assert made.name.startswith("switchboard-backup-")
        assert f"Backed up {home} to {made}:" in done.stdout
        assert f"state.db      {(made / 'state.db').stat().st_size:,} bytes, schema version {SCHEMA_VERSION}, integrity ok" in done.stdout
        assert "memories/     2 files (shared/MEMORY.md, users/telegram/42/USER.md)" in done.stdout
        assert "Not included: .env" in done.stdout

        refused = switchboard("restore", str(made), home=home)
        assert refused.returncode == 1
        assert "is open in another process: stop the gateway" in refused.stderr
        assert not (home / "state.db.before-restore").exists()
        writer.wait_for_seq(len(seqs(made / "state.db")) + 200)
    finally:
        writer.stop()

    memories = {"memories": 0o700, "memories/shared": 0o700, "memories/shared/MEMORY.md": 0o600, "memories/users": 0o700,
                "memories/users/telegram": 0o700, "memories/users/telegram/42": 0o700,
                "memories/users/telegram/42/USER.md": 0o600}  # fmt: skip
    assert modes(made) == {".": 0o700, "state.db": 0o600, **memories, "SOUL.md": 0o600, "config.yaml": 0o600,
                           "MANIFEST.json": 0o600}  # fmt: skip
    manifest = json.loads((made / "MANIFEST.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert sorted(manifest["files"]) == [
        "SOUL.md", "config.yaml", "memories/shared/MEMORY.md", "memories/users/telegram/42/USER.md", "state.db",
    ]  # fmt: skip

    backed_up = seqs(made / "state.db")
    assert backed_up == list(range(1, len(backed_up) + 1))
    newer = len(seqs(home / "state.db"))
    (home / "SOUL.md").write_text("You are verbose.\n", encoding="utf-8")
    MemoryBank(home / "memories").store(ALICE).add(MemoryTarget.MEMORY, "Written after the backup.")

    done = switchboard("restore", str(made), home=home)
    assert done.returncode == 0, done.stderr
    assert "the previous one is state.db.before-restore" in done.stdout
    assert seqs(home / "state.db") == backed_up
    assert len(seqs(home / "state.db.before-restore")) == newer
    assert (home / "SOUL.md").read_text() == "You are terse.\n"
    assert (home / "SOUL.md.before-restore").read_text() == "You are verbose.\n"
    restored = {k: v for k, v in modes(home).items() if k.startswith("memories/") or k == "memories"}
    assert restored == memories
    assert (home / "memories" / "users" / "telegram" / "42" / "USER.md").read_text() == "Prefers short answers.\n"
    assert (home / "memories.before-restore" / "users" / "telegram" / "42" / "MEMORY.md").exists()
    assert asyncio.run(count_messages(home / "state.db")) == len(backed_up), "the gateway's Store opens the restored file"


async def count_messages(db: Path) -> int:
    async with await Store.open(db) as store:
        (session,) = await store.list_sessions()
        return len(await store.load_messages(session.id))


async def create_database(db: Path) -> None:
    """Create an empty database the way the gateway does."""
    await (await Store.open(db)).close()


def test_restore_refuses_a_backup_that_was_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    asyncio.run(create_database(home / "state.db"))
    done = switchboard("backup", str(tmp_path / "b"), home=home)
    assert done.returncode == 0, done.stderr
    (made,) = (tmp_path / "b").iterdir()
    (made / "SOUL.md").write_text("tampered\n", encoding="utf-8")
    refused = switchboard("restore", str(made), home=home)
    assert refused.returncode == 1
    assert "differs from MANIFEST.json" in refused.stderr
    assert not (home / "state.db.before-restore").exists()


def test_backup_without_a_database_says_there_is_nothing_to_back_up(tmp_path: Path) -> None:
    done = switchboard("backup", str(tmp_path / "b"), home=tmp_path / "home")
    assert done.returncode == 1
    assert "there is no database at" in done.stderr and "nothing to back up" in done.stderr
    assert list((tmp_path / "b").iterdir()) == [], "no half-written backup is left behind"
