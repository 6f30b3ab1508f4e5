"""The media folder: the bytes of the photos and documents users send, named by their SHA-256.

    folder = MediaFolder(home / "media")
    name = await folder.put(data)            # "3f9a...": the file is root/3f/3f9a...
    data = await folder.read(name)           # None once pruned (so it is an agent.MediaSource)
    files, freed = await folder.prune(30 * 86_400)

A stored message refers to its media by these names (``messages.media``); the bytes never go in
the database. The same bytes sent twice are one file. Files are 0600 and directories 0700
whatever the umask. A file appears whole or not at all: it is written under a temporary dot
name in its directory, flushed, then renamed to its name. Putting bytes that are kept already
writes nothing and makes the file young again, so retention (``prune``, by modification time)
counts from the last time anyone sent them.

Only the gateway's process writes here; a thread lock inside it keeps a prune from removing
a file a ``put`` is refreshing at that moment. Other processes (``switchboard backup``) only
read, and files never change once named. The blocking file work runs in a thread
(``asyncio.to_thread``), so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Final

from storage.files import fsync_path
from storage.log import log

__all__ = ["MediaFolder", "is_media_name", "media_files"]

_NAME: Final = re.compile(r"[0-9a-f]{64}")
_SHARD: Final = re.compile(r"[0-9a-f]{2}")
PRIVATE_DIR: Final = 0o700
PRIVATE_FILE: Final = 0o600
LEFTOVER_AGE: Final = 3600.0
"""A temporary file older than this is what a writer that died left behind; ``prune`` removes it."""


def is_media_name(name: str) -> bool:
    """Whether ``name`` is a media file's name: 64 lowercase hex digits (a SHA-256), nothing else."""
    return _NAME.fullmatch(name) is not None


class MediaFolder:
    """Content-addressed files under ``root`` (``root/<first two hex digits>/<sha256>``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()  # put's refresh-or-create against prune's check-and-remove

    def path(self, sha256: str) -> Path:
        """Where the file named ``sha256`` is (or would be). ``ValueError`` for anything but a SHA-256 in hex."""
        if not isinstance(sha256, str) or not is_media_name(sha256):
            raise ValueError(f"{sha256!r} is not a sha256 in lowercase hex (64 characters 0-9a-f): no such media file")
        return self.root / sha256[:2] / sha256

    async def put(self, data: bytes) -> str:
        """Keep ``data``; returns its name (the SHA-256 in hex)."""
        return await asyncio.to_thread(self._put, data)

    async def read(self, sha256: str) -> bytes | None:
        """The bytes named ``sha256``, or None when they are not kept (pruned, or never put).

        A name that is not a SHA-256 (a damaged row) reads as not kept, with a warning: the
        conversation goes on with a stand-in rather than failing on every turn.
        """
        try:
            path = self.path(sha256)
        except ValueError as error:
            log.warning("storage.media.bad_name", root=str(self.root), reason=str(error))
            return None
        return await asyncio.to_thread(_read_or_none, path)

    async def prune(self, max_age_seconds: float) -> tuple[int, int]:
        """Remove files last put more than ``max_age_seconds`` ago; returns (files, bytes) removed.

        Temporary files left by a writer that died are removed once they are an hour old. Files
        whose names are not media names are left alone (they are not ours).
        """
        return await asyncio.to_thread(self._prune, max_age_seconds)

    async def usage(self) -> tuple[int, int]:
        """How many files are kept, and their bytes."""
        return await asyncio.to_thread(self._usage)

    # -- in a thread -----------------------------------------------------------------------------

    def _put(self, data: bytes) -> str:
        name = hashlib.sha256(data).hexdigest()
        path = self.root / name[:2] / name
        with self._lock:
            try:
                os.utime(path)  # kept already: young again, nothing written
                return name
            except FileNotFoundError:
                pass
        _private_dir(self.root, parents=True)
        _private_dir(path.parent)
        temporary = path.with_name(f".{name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        try:
            try:
                os.fchmod(fd, PRIVATE_FILE)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        fsync_path(path.parent)  # the name survives a crash as surely as the message that refers to it
        return name

    def _prune(self, max_age: float) -> tuple[int, int]:
        now = time.time()
        files = removed = 0
        for entry in self._entries():
            is_temporary = entry.name.startswith(".")
            limit = LEFTOVER_AGE if is_temporary else max_age
            with self._lock:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if now - info.st_mtime <= limit:
                        continue
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
            files += 1
            removed += info.st_size
        if files:
            log.info("storage.media.pruned", root=str(self.root), files=files, bytes=removed, max_age_s=max_age)
        return files, removed

    def _usage(self) -> tuple[int, int]:
        files = size = 0
        for entry in self._entries():
            if entry.name.startswith("."):
                continue
            try:
                size += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
            files += 1
        return files, size

    def _entries(self) -> list[os.DirEntry[str]]:
        return _entries(self.root, temporary=True)


def media_files(root: Path) -> list[Path]:
    """The media files under ``root`` (no temporary files, nothing that is not ours), in name order.

    Blocking: for tools such as ``switchboard backup``, not for the event loop.
    """
    return sorted(Path(entry.path) for entry in _entries(root, temporary=False))


def _entries(root: Path, *, temporary: bool) -> list[os.DirEntry[str]]:
    """Every media file in the shard directories, and with ``temporary`` every temporary file."""
    found: list[os.DirEntry[str]] = []
    for shard in _scan(root):
        if not (_SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False)):
            continue
        for entry in _scan(Path(shard.path)):
            if not entry.is_file(follow_symlinks=False):
                continue
            if is_media_name(entry.name) and entry.name.startswith(shard.name):
                found.append(entry)
            elif temporary and entry.name.startswith(".") and entry.name.endswith(".tmp"):
                found.append(entry)
    return found


def _scan(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _private_dir(path: Path, *, parents: bool = False) -> None:
    """Make ``path`` if missing, 0700 whatever the umask (an existing directory is left as it is)."""
    if parents:
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    try:
        os.mkdir(path, PRIVATE_DIR)
    except FileExistsError:
        return
    os.chmod(path, PRIVATE_DIR)
