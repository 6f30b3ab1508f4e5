"""Small file-system steps the backup and the media folder share."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_path"]


def fsync_path(path: Path) -> None:
    """Flush ``path`` to the disk: a file's bytes, or a directory's entries (a name just made by a rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
