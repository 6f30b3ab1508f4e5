"""``switchboard backup`` and ``restore`` as subprocesses, with another process writing to the database."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import pytest

from agent.memory import MemoryTarget
from agent.memory_scopes import MemoryBank, MemoryScope
from config.home import ensure_home
from config.loader import example_config_text
from storage import SCHEMA_VERSION, MediaFolder, Store
from tests.gateway.processes import switchboard
from tests.storage.test_backup import Writer, seqs


ALICE = MemoryScope.person("telegram", "42")
PHOTO, SCAN = b"\xff\xd8\xff\xe0 a photo of a whiteboard", b"%PDF-1.7 an invoice"
WEEK = 7 * 86_400


def make_home(home: Path) -> None:
    ensure_home(home, config_template=example_config_text())
    MemoryBank(home / "memories").store(ALICE).add(MemoryTarget.USER, "Prefers short answers.")
    (home / "memories" / "shared").mkdir(mode=0o700)
    (home / "memories" / "shared" / "MEMORY.md").write_text("Support hours are 9 to 5.\n", encoding="utf-8")
    (home / "memories" / "shared" / "MEMORY.md").chmod(0o600)
    (home / "SOUL.md").write_text("You are terse.\n", encoding="utf-8")
    (home / "SOUL.md").chmod(0o600)


def put_media(home: Path, *blobs: bytes) -> list[str]:
    """Keep ``blobs`` in the home's media folder as the gateway does; each file dated a week back."""
    folder = MediaFolder(home / "media")
    names = [asyncio.run(folder.put(blob)) for blob in blobs]
    for name in names:
        os.utime(folder.path(name), (time.time() - WEEK, time.time() - WEEK))
    return names


def media_modes(root: Path, names: list[str]) -> dict[str, int]:
    return {"media": 0o700, **{f"media/{n[:2]}": 0o700 for n in names}, **{f"media/{n[:2]}/{n}": 0o600 for n in names}}


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_backup_while_writing_then_restore_round_trip(tmp_path: Path) -> None:
    home, backups = tmp_path / "home", tmp_path / "backups"
    make_home(home)
    kept = put_media(home, PHOTO, SCAN)
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
        assert f"media/        2 files, {len(PHOTO) + len(SCAN)} bytes" in done.stdout
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
    assert modes(made) == {".": 0o700, "state.db": 0o600, **memories, **media_modes(made, kept), "SOUL.md": 0o600,
                           "config.yaml": 0o600, "MANIFEST.json": 0o600}  # fmt: skip
    manifest = json.loads((made / "MANIFEST.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert sorted(manifest["files"]) == sorted([
        "SOUL.md", "config.yaml", "memories/shared/MEMORY.md", "memories/users/telegram/42/USER.md", "state.db",
        *(f"media/{n[:2]}/{n}" for n in kept),
    ])  # fmt: skip

    backed_up = seqs(made / "state.db")
    assert backed_up == list(range(1, len(backed_up) + 1))
    newer = len(seqs(home / "state.db"))
    (home / "SOUL.md").write_text("You are verbose.\n", encoding="utf-8")
    MemoryBank(home / "memories").store(ALICE).add(MemoryTarget.MEMORY, "Written after the backup.")
    (later,) = put_media(home, b"sent after the backup")
    (home / "media" / kept[0][:2] / kept[0]).unlink()  # pruned after the backup

    done = switchboard("restore", str(made), home=home)
    assert done.returncode == 0, done.stderr
    assert "media/        2 files restored; the previous ones are in media.before-restore" in done.stdout
    assert "the previous one is state.db.before-restore" in done.stdout
    assert seqs(home / "state.db") == backed_up
    assert len(seqs(home / "state.db.before-restore")) == newer
    assert (home / "SOUL.md").read_text() == "You are terse.\n"
    assert (home / "SOUL.md.before-restore").read_text() == "You are verbose.\n"
    restored = {k: v for k, v in modes(home).items() if k.startswith("memories/") or k == "memories"}
    assert restored == memories
    assert (home / "memories" / "users" / "telegram" / "42" / "USER.md").read_text() == "Prefers short answers.\n"
    assert (home / "memories.before-restore" / "users" / "telegram" / "42" / "MEMORY.md").exists()
    assert {k: v for k, v in modes(home).items() if k.startswith("media/") or k == "media"} == media_modes(home, kept)
    folder = MediaFolder(home / "media")
    assert [asyncio.run(folder.read(n)) for n in kept] == [PHOTO, SCAN]
    assert asyncio.run(folder.read(later)) is None
    assert (home / "media.before-restore" / later[:2] / later).exists()
    assert asyncio.run(folder.prune(WEEK + 3600)) == (0, 0), "restored files keep their age for the retention"
    assert asyncio.run(folder.prune(WEEK - 3600)) == (2, len(PHOTO) + len(SCAN))
    assert asyncio.run(count_messages(home / "state.db")) == len(backed_up), "the gateway's Store opens the restored file"


async def count_messages(db: Path) -> int:
    async with await Store.open(db) as store:
        (session,) = await store.list_sessions()
        return len(await store.load_messages(session.id))


async def create_database(db: Path) -> None:
    """Create an empty database the way the gateway does."""
    await (await Store.open(db)).close()


@pytest.mark.parametrize("changed", ["SOUL.md", "a media file"])
def test_restore_refuses_a_backup_that_was_changed(tmp_path: Path, changed: str) -> None:
    home = tmp_path / "home"
    make_home(home)
    asyncio.run(create_database(home / "state.db"))
    (kept,) = put_media(home, PHOTO)
    done = switchboard("backup", str(tmp_path / "b"), home=home)
    assert done.returncode == 0, done.stderr
    (made,) = (tmp_path / "b").iterdir()
    path = made / "SOUL.md" if changed == "SOUL.md" else made / "media" / kept[:2] / kept
    path.write_bytes(b"tampered\n")
    refused = switchboard("restore", str(made), home=home)
    assert refused.returncode == 1
    assert "differs from MANIFEST.json" in refused.stderr
    assert not (home / "state.db.before-restore").exists() and not (home / "media.before-restore").exists()


def test_backup_without_a_database_says_there_is_nothing_to_back_up(tmp_path: Path) -> None:
    done = switchboard("backup", str(tmp_path / "b"), home=tmp_path / "home")
    assert done.returncode == 1
    assert "there is no database at" in done.stderr and "nothing to back up" in done.stderr
    assert list((tmp_path / "b").iterdir()) == [], "no half-written backup is left behind"


def test_a_backup_made_before_media_were_kept_restores_and_leaves_the_media_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    asyncio.run(create_database(home / "state.db"))
    done = switchboard("backup", str(tmp_path / "b"), home=home)
    assert done.returncode == 0, done.stderr
    assert "media/        0 files" in done.stdout
    (made,) = (tmp_path / "b").iterdir()
    # What an older build wrote: no media/ and no media in the manifest.
    (made / "media").rmdir()
    manifest = json.loads((made / "MANIFEST.json").read_text())
    assert not [name for name in manifest["files"] if name.startswith("media")]
    (kept,) = put_media(home, PHOTO)
    done = switchboard("restore", str(made), home=home)
    assert done.returncode == 0, done.stderr
    assert "media/        not in the backup; the home's is unchanged" in done.stdout
    assert asyncio.run(MediaFolder(home / "media").read(kept)) == PHOTO
    assert not (home / "media.before-restore").exists()
