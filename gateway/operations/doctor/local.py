"""Checks that only read files: configuration, home permissions, database, disk space."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Final

from config import ConfigError, LoadedConfig
from config.plan import build_plan
from gateway.operations.doctor.results import Check
from storage import SCHEMA_VERSION, check_database

MIN_FREE_BYTES: Final = 256 * 1024 * 1024
"""Free space below this fails the disk check, whatever the database's size."""


def config_check(loaded: LoadedConfig) -> Check:
    plan = build_plan(loaded)
    source = str(loaded.config_path) if loaded.config_path else "built-in defaults (no config.yaml)"
    if not plan.ready:
        return Check.fail("config", f"{source} loads, but `switchboard run` would refuse: {'; '.join(plan.blockers)}",
                          "set what is named above, then run `switchboard check`")  # fmt: skip
    return Check.ok("config", f"{source} is valid; `switchboard run` would start {', '.join(plan.enabled)}")


def config_error_check(error: ConfigError) -> Check:
    where = f" in {error.source}" if error.source else ""
    return Check.fail("config", f"the configuration{where} cannot be used: {'; '.join(error.problems)}",
                      "correct those keys (`switchboard check` lists the same problems)")  # fmt: skip


def home_check(loaded: LoadedConfig) -> Check:
    home = loaded.home
    if not home.is_dir():
        return Check.fail("home", f"{home} does not exist",
                          "run `switchboard run` once to lay it out, or point SWITCHBOARD_HOME at the right directory")  # fmt: skip
    if not os.access(home, os.W_OK | os.X_OK):
        return Check.fail("home", f"{home} is not writable by this user (uid {os.getuid()})",
                          f"run Switchboard as the owner of {home}, or chown it to that user")  # fmt: skip
    exposed = [f"{_label(home, path)} ({stat.S_IMODE(path.stat().st_mode):04o})" for path in _private_paths(loaded)
               if stat.S_IMODE(path.stat().st_mode) & 0o077]  # fmt: skip
    if exposed:
        return Check.fail("home", f"group or others can access {', '.join(exposed)}",
                          f"chmod 700 {home} && chmod -R go-rwx {home}")  # fmt: skip
    return Check.ok("home", f"{home} is 0700 and the config, secrets, database and memories in it are private")


def database_check(loaded: LoadedConfig) -> Check:
    """The SQLite file (a PostgreSQL server is asked by ``server_database.py``)."""
    path = loaded.db_path
    if not path.exists():
        return Check.skip("database", f"no database yet at {path} (`switchboard run` creates it)")
    check = check_database(path)
    version = check.schema_version
    if version is not None and version > SCHEMA_VERSION:
        return Check.fail("database", f"{path} was written by a newer Switchboard (schema version {version}, "
                          f"this build knows up to {SCHEMA_VERSION})",
                          "upgrade Switchboard, or restore a backup made with this version")  # fmt: skip
    if not check.ok:
        return Check.fail("database", f"{path} is damaged ({'; '.join(check.problems)})",
                          "stop the gateway and restore the newest backup: `switchboard restore BACKUP_DIR`")  # fmt: skip
    upgrade = "current" if version == SCHEMA_VERSION else f"migrated to {SCHEMA_VERSION} on the next start"
    return Check.ok("database", f"{path} passes quick_check, schema version {version} ({upgrade}), {_size(check.size)}")


def disk_check(loaded: LoadedConfig) -> Check:
    where = _existing(loaded.home)
    usage = shutil.disk_usage(where)
    database = loaded.db_path.stat().st_size if loaded.db_path.exists() else 0
    needed = max(MIN_FREE_BYTES, 2 * database)
    detail = f"{_size(usage.free)} free on the disk holding {loaded.home}"
    if usage.free < needed:
        return Check.fail("disk", f"only {detail}; at least {_size(needed)} is needed (growth and one backup)",
                          "free some space on that disk, or move SWITCHBOARD_HOME to a bigger one")  # fmt: skip
    return Check.ok("disk", detail)


def _private_paths(loaded: LoadedConfig) -> list[Path]:
    """The home, everything directly in it and in logs/, everything under memories/ (a folder per person
    and conversation), the database and config wherever they are."""
    home = loaded.home
    candidates = [home, *sorted(home.iterdir())]
    candidates += [Path(f"{loaded.db_path}{suffix}") for suffix in ("", "-wal", "-shm")]
    if loaded.config_path is not None:
        candidates.append(loaded.config_path)
    if loaded.memories_dir.is_dir():
        candidates += sorted(loaded.memories_dir.rglob("*"))
    if loaded.log_path.parent.is_dir():
        candidates += sorted(loaded.log_path.parent.iterdir())
    return list(dict.fromkeys(path for path in candidates if path.exists()))


def _label(home: Path, path: Path) -> str:
    if path == home:
        return f"{home}/"
    return str(path.relative_to(home)) if path.is_relative_to(home) else str(path)


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _size(count: int) -> str:
    if count < 1024:
        return f"{count:,} bytes"
    value = float(count)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:,.1f} {unit}"
