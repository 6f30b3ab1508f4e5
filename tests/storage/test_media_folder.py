"""storage.MediaFolder: content-addressed files under the home, private, written whole, pruned by age."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import MediaFolder

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400.0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look last written ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


async def test_put_names_the_file_by_its_sha256_and_keeps_it_private(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path / "media")
    data = b"\x89PNG\r\n\x1a\n not really a picture"
    previous = os.umask(0o002)  # a lax umask: what the folder creates must not follow it
    try:
        name = await folder.put(data)
    finally:
        os.umask(previous)
    assert name == hashlib.sha256(data).hexdigest()
    path = tmp_path / "media" / name[:2] / name
    assert folder.path(name) == path
    assert path.read_bytes() == data
    assert (mode(tmp_path / "media"), mode(path.parent), mode(path)) == (0o700, 0o700, 0o600)
    assert await folder.read(name) == data
    assert await folder.read("0" * 64) is None
    assert await folder.usage() == (1, len(data))


async def test_put_of_bytes_already_kept_refreshes_their_age_and_writes_nothing(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path / "media")
    name = await folder.put(b"same photo")
    path = folder.path(name)
    age(path, 40 * DAY)
    inode = path.stat().st_ino
    assert await folder.put(b"same photo") == name
    assert path.stat().st_ino == inode, "the file was not written again"
    assert time.time() - path.stat().st_mtime < DAY
    assert await folder.prune(30 * DAY) == (0, 0)
    assert await folder.read(name) == b"same photo"


async def test_prune_removes_files_older_than_the_age_and_says_how_much(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path / "media")
    old = [await folder.put(f"old {n}".encode()) for n in range(3)]
    new = await folder.put(b"new one")
    for name in old:
        age(folder.path(name), 31 * DAY)
    stray = tmp_path / "media" / "README.txt"  # not ours: left alone
    stray.write_text("notes")
    age(stray, 400 * DAY)
    assert await folder.prune(30 * DAY) == (3, sum(len(f"old {n}") for n in range(3)))
    assert [await folder.read(name) for name in old] == [None, None, None]
    assert await folder.read(new) == b"new one"
    assert stray.exists()
    assert await folder.usage() == (1, len(b"new one"))
    assert await folder.prune(30 * DAY) == (0, 0)


async def test_an_empty_or_missing_folder_has_nothing_to_prune(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path / "media")
    assert await folder.usage() == (0, 0)
    assert await folder.prune(0) == (0, 0)
    assert not (tmp_path / "media").exists(), "reading and pruning create nothing"


async def test_many_puts_at_once_each_leave_one_whole_file(tmp_path: Path) -> None:
    folder = MediaFolder(tmp_path / "media")
    blobs = [os.urandom(200_000) for _ in range(8)] * 3  # every one put three times at once
    names = await asyncio.gather(*(folder.put(blob) for blob in blobs))
    assert [hashlib.sha256(await folder.read(n) or b"").digest() for n in names] == [
        hashlib.sha256(b).digest() for b in blobs
    ]
    files = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert len(files) == 8, "no temporary file is left behind"


KILLED_WRITER = """
import os, sys
from pathlib import Path
import storage.media as media

real_replace = os.replace
def crash(*args):  # the process dies after writing the temporary file, before the rename
    os._exit(9)
media.os.replace = crash
import asyncio
asyncio.run(media.MediaFolder(Path(sys.argv[1])).put(b"half" * 50_000))
"""


async def test_a_writer_killed_before_the_rename_leaves_no_file_under_the_name(tmp_path: Path) -> None:
    root = tmp_path / "media"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(root)], env=env, capture_output=True, check=False)
    assert done.returncode == 9, done.stderr
    folder = MediaFolder(root)
    name = hashlib.sha256(b"half" * 50_000).hexdigest()
    assert not folder.path(name).exists() and await folder.read(name) is None
    (temporary,) = [p for p in root.rglob("*") if p.is_file()]
    assert temporary.name.startswith("."), temporary
    assert await folder.usage() == (0, 0), "a temporary file is not counted as kept"
    age(temporary, 2 * DAY)
    assert await folder.prune(30 * DAY) == (1, 200_000), "a temporary file left over a day is cleaned up"
    assert not temporary.exists()


@pytest.mark.parametrize(
    "name",
    ["../../../etc/passwd", "ab/../../x", "AB" * 32, "ab" * 31, "ab" * 33, "/" + "a" * 63, "g" * 64, "", "ab" * 31 + "\n"],
)
async def test_names_that_are_not_a_sha256_are_refused(tmp_path: Path, name: str) -> None:
    folder = MediaFolder(tmp_path / "media")
    with pytest.raises(ValueError, match="not a sha256"):
        folder.path(name)
    assert await folder.read(name) is None
    assert not (tmp_path / "media").exists()
