"""The home directory: where config, secrets, state, memories and logs live.

``$SWITCHBOARD_HOME``, default ``~/.switchboard``. Directories are created
0700 and files that may hold secrets or conversation text 0600.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from config.models import PlatformsConfig
from config.secret_variables import declared_secrets

HOME_VARIABLE = "SWITCHBOARD_HOME"
DEFAULT_HOME = "~/.switchboard"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

DOTENV_TEMPLATE = """\
# Secrets for Switchboard. Values here fill in variables the environment does not set (or sets empty).
# This file should stay readable by its owner only (0600).
#
# The model (one of these, matching model.provider in config.yaml):
# ANTHROPIC_API_KEY=sk-ant-...
# OPENAI_API_KEY=sk-...
#
# Platforms (set the ones you use):
""" + "".join(f"# {mark.name}={mark.example}\n" for mark in declared_secrets(PlatformsConfig).values() if mark.fallback) + """\
#
# PostgreSQL (only with a postgresql:// storage.url; the password never goes in the URL):
# PGPASSWORD=...
"""
"""The .env a new home starts with: every variable a secret is read from, commented out (the platforms' as
their sections declare them)."""


def resolve_home(environ: Mapping[str, str]) -> Path:
    """The home directory named by the environment (not created here)."""
    raw = environ.get(HOME_VARIABLE) or DEFAULT_HOME
    return Path(os.path.expanduser(raw)).resolve()


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) if missing; the directory itself is 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR)


def write_private_file(path: Path, text: str) -> bool:
    """Create ``path`` with 0600 holding ``text``; an existing file is left alone. True if written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def ensure_home(home: Path, *, config_template: str) -> list[Path]:
    """Create the home layout on first run. Returns the files it created."""
    ensure_private_dir(home)
    for sub in ("memories", "logs"):
        ensure_private_dir(home / sub)
    created = []
    for name, text in (("config.yaml", config_template), (".env", DOTENV_TEMPLATE)):
        if write_private_file(home / name, text):
            created.append(home / name)
    return created
