"""``switchboard backup DIR`` and ``switchboard restore BACKUP``: the home's state, copied safely.

    switchboard backup /var/backups/switchboard     # safe while the gateway runs
    switchboard restore /var/backups/switchboard/switchboard-backup-20260101T030000Z

A backup is a directory ``switchboard-backup-<UTC time>`` made inside DIR:

    state.db        the database as of one commit (SQLite's online backup API), integrity-checked
    memories/       every memory folder (shared/, users/..., chats/..., threads/..., legacy-...),
                    each copied under its memory lock
    media/          the photos and documents users sent (the home's media folder, same layout,
                    modification times kept so retention counts on from the same dates)
    SOUL.md         the agent's identity, if the home has one
    config.yaml     the configuration, if the home has one
    MANIFEST.json   what was written, with sizes and SHA-256 digests

``.env`` is left out on purpose: it holds the tokens, which belong in a secret
store rather than in every backup. config.yaml is copied with every secret
written inline in it replaced by a ``${VAR}`` reference (``config.inline_secrets``);
the masked keys are printed and listed in MANIFEST.json, whose text is masked
like the log. Files are 0600 (directories 0700). The directory is written under
a ``.partial`` name and renamed when complete.

Media files are copied after the database: a file the copy of the database refers to was
kept before its message was stored, so it is in the backup unless retention pruned it
meanwhile (the turn then shows a stand-in, as after any prune). Files never change once
named, so no lock is needed. A media/ beside the database (rather than one archive) keeps
restore a copy of files, and each file is checked against the manifest like the rest.

``restore`` refuses while any process has the database open (stop the gateway
first). It checks the manifest's digests and the database before changing
anything, then renames what it replaces to ``*.before-restore``. A backup made
before media were kept has no media/: the home's folder is then left as it is. config.yaml
is only put back when the home has none (and then names the variables its
masked secrets need). Exit status: 0, 1 when the backup or restore failed or
was refused, 2 for configuration errors.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from config.errors import ConfigError
from config.inline_secrets import MaskedConfig, mask_inline_secrets
from config.loader import LoadedConfig
from gateway.operations.cli.common import add_config_option, load_config_or_exit, show
from gateway.operations.redaction import redact_values
from gateway.operations.version import version
from storage import BackupError, backup_database, database_in_use, media_files, restore_database

EXIT_FAILED = 1
MANIFEST = "MANIFEST.json"
PREFIX = "switchboard-backup-"
KEPT = ".before-restore"
LISTED_MEMORY_FILES = 5  # a gateway with many users has a memory folder for each: name a few


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = subparsers.add_parser(
        "backup",
        help="copy the database, memories, media and SOUL.md (safe while running)",
        description="Write a consistent backup of the home into a new directory inside DIR.",
    )
    backup.add_argument("directory", metavar="DIR", type=Path, help="where to create the backup (made if missing)")
    add_config_option(backup)
    backup.set_defaults(handler=backup_command)
    restore = subparsers.add_parser(
        "restore",
        help="put a backup back (the gateway must be stopped)",
        description="Restore a directory written by `switchboard backup`; what it replaces is kept as *.before-restore.",
    )
    restore.add_argument("backup", metavar="BACKUP", type=Path, help="a switchboard-backup-... directory")
    add_config_option(restore)
    restore.set_defaults(handler=restore_command)


# -- a PostgreSQL database ---------------------------------------------------------------------------


def _refuse_server(command: str, loaded: LoadedConfig) -> int:
    """``backup`` and ``restore`` copy a SQLite home; a PostgreSQL database is the server's to dump and restore.
    Nothing is written: the message gives the commands for the configured database (its URL holds no password)."""
    url = loaded.database_url
    if command == "backup":
        steps = (f"  pg_dump --format=custom --dbname='{url}' --file=switchboard-$(date -u +%Y%m%dT%H%M%SZ).dump\n"
                 "(safe while the gateway runs: pg_dump reads one consistent snapshot)")  # fmt: skip
    else:
        steps = (f"  stop the gateway, then: pg_restore --clean --if-exists --no-owner --dbname='{url}' BACKUP.dump\n"
                 "(into the database storage.url names; start the gateway again after)")  # fmt: skip
    show(f"switchboard {command}: the database is PostgreSQL ({url}), which `switchboard {command}` does not "
         f"{'copy' if command == 'backup' else 'write'}; nothing was done. Use the server's own tools, with PGPASSWORD "
         f"set as for the gateway:\n{steps}\nThe home's memories/, media/ and SOUL.md are files: copy {loaded.home} "
         "with your file backups.", sys.stderr)  # fmt: skip
    return EXIT_FAILED


# -- backup ----------------------------------------------------------------------------------------


def backup_command(args: argparse.Namespace) -> int:
    loaded = load_config_or_exit(args)
    if loaded.engine == "postgresql":
        return _refuse_server("backup", loaded)
    try:
        target, lines = write_backup(loaded, args.directory)
    except (BackupError, ConfigError, OSError) as error:
        show(f"switchboard backup: {_reason(error)}", sys.stderr)
        return EXIT_FAILED
    show(f"Backed up {loaded.home} to {target}:\n" + "\n".join(f"  {line}" for line in lines))
    show("Not included: .env (it holds your tokens; keep them in your secret store) and logs/.")
    return 0


def write_backup(loaded: LoadedConfig, parent: Path) -> tuple[Path, list[str]]:
    """Write the backup directory; returns its path and one line per item written."""
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    final = _free_name(parent, PREFIX + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    partial = final.with_name(f".{final.name}.partial")
    partial.mkdir(mode=0o700)
    try:
        lines = _fill(loaded, partial)
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final, lines


def _fill(loaded: LoadedConfig, target: Path) -> list[str]:
    check = backup_database(loaded.db_path, target / "state.db")
    lines = [f"state.db      {check.size:,} bytes, schema version {check.schema_version}, integrity ok"]
    copied = _copy_memories(loaded.memories_dir, target / "memories")
    shown = ", ".join(copied[:LISTED_MEMORY_FILES]) + (f", and {len(copied) - LISTED_MEMORY_FILES:,} more"
                                                     if len(copied) > LISTED_MEMORY_FILES else "")  # fmt: skip
    names = f" ({shown})" if copied else ""
    lines.append(f"memories/     {_files_count(len(copied))}{names}")
    count, size = _copy_media(loaded.media_dir, target / "media")
    lines.append(f"media/        {_files_count(count)}" + (f", {size:,} bytes" if count else ""))
    if loaded.soul_path.is_file():
        _copy_private(loaded.soul_path, target / "SOUL.md")
        lines.append(f"SOUL.md       {loaded.soul_path.stat().st_size:,} bytes")
    else:
        lines.append("SOUL.md       not in the home, skipped")
    masked = MaskedConfig("")
    if loaded.config_path is not None and loaded.config_path.is_file():
        masked = mask_inline_secrets(loaded)
        _write_private(target / "config.yaml", masked.text)
        lines += _config_lines(masked, (target / "config.yaml").stat().st_size)
    else:
        lines.append("config.yaml   not in the home, skipped")
    manifest = {
        "switchboard": version(),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "home": str(loaded.home),
        "schema_version": check.schema_version,
        "files": {name: _digest(target / name) for name in _files(target)},
        "masked_secrets": {"config.yaml": masked.masked} if masked.masked else {},
    }
    # Keys are kept: the names in "files" must be those on disk, or the backup fails its own check.
    _write_private(target / MANIFEST, json.dumps(redact_values(manifest), indent=2) + "\n")
    lines.append(f"{MANIFEST} sizes and SHA-256 of {len(manifest['files'])} files")
    return lines


def _config_lines(masked: MaskedConfig, size: int) -> list[str]:
    if not masked.masked and not masked.elsewhere:
        return [f"config.yaml   {size:,} bytes (no secret written in it)"]
    where = " (also in comments)" if masked.elsewhere else ""
    lines = [f"config.yaml   {size:,} bytes; secrets written in it are masked in the copy{where}, "
             "their values belong in .env (restoring this copy needs them there):"]  # fmt: skip
    return lines + [f"                {path} -> ${{{variable}}}" for path, variable in masked.masked.items()]


def _copy_memories(source: Path, target: Path) -> list[str]:
    """Copy every folder's files (one folder per person, conversation and layer); their relative paths.

    Each folder is copied under its own lock, so its MEMORY.md and USER.md are of one moment.
    Dot files (the lock, temporary files) are left out.
    """
    from agent import MEMORY_LOCK_FILE, make_private_dirs  # not at the top: every CLI start loads this module

    target.mkdir(mode=0o700)
    if not source.is_dir():
        return []
    folders = [source, *sorted(p for p in source.rglob("*") if p.is_dir() and not _hidden(p.relative_to(source)))]
    copied: list[str] = []
    for folder in folders:
        relative = folder.relative_to(source)
        with _shared_lock(folder / MEMORY_LOCK_FILE):  # the lock MemoryStore takes for every write
            names = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
            if names:
                make_private_dirs(target / relative)
            for name in names:
                _copy_private(folder / name, target / relative / name)
                copied.append((relative / name).as_posix())
    return copied


def _copy_media(source: Path, target: Path) -> tuple[int, int]:
    """Copy every media file (``root/<xx>/<sha256>``); how many, and their bytes.

    A file pruned between listing and copying is left out: the database copy, made first,
    then shows the stand-in the gateway would show.
    """
    target.mkdir(mode=0o700)
    count = size = 0
    for path in media_files(source):
        shard = target / path.parent.name
        if not shard.is_dir():
            shard.mkdir(mode=0o700)
            os.chmod(shard, 0o700)
        try:
            _copy_private(path, shard / path.name)
        except FileNotFoundError as error:
            if error.filename != str(path):
                raise
            continue
        count += 1
        size += (shard / path.name).stat().st_size
    return count, size


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)




@contextlib.contextmanager
def _shared_lock(path: Path) -> Iterator[None]:
    """Hold the memory store's lock shared, so no write lands between copying MEMORY.md and USER.md."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # nothing has written memories yet
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


# -- restore ---------------------------------------------------------------------------------------


def restore_command(args: argparse.Namespace) -> int:
    loaded = load_config_or_exit(args)
    if loaded.engine == "postgresql":
        return _refuse_server("restore", loaded)
    try:
        lines = restore_backup(loaded, args.backup)
    except (BackupError, OSError) as error:
        show(f"switchboard restore: {_reason(error)}", sys.stderr)
        return EXIT_FAILED
    show(f"Restored {args.backup} into {loaded.home}:\n" + "\n".join(f"  {line}" for line in lines))
    show("Start the gateway again (switchboard run, systemctl start switchboard, or docker compose up -d).")
    return 0


def restore_backup(loaded: LoadedConfig, source: Path) -> list[str]:
    """Check everything, then restore the database, memories, media and SOUL.md; one line per item."""
    manifest = _verify_manifest(source)
    if database_in_use(loaded.db_path):
        raise BackupError(f"{loaded.db_path} is open in another process: stop the gateway "
                          "(systemctl stop switchboard, docker compose stop), then restore again")  # fmt: skip
    replaced = [(source / "memories", loaded.memories_dir), (source / "media", loaded.media_dir),
                (source / "SOUL.md", loaded.soul_path)]  # fmt: skip
    kept_db = _kept(loaded.db_path)
    for path in [kept_db] + [_kept(live) for backup, live in replaced if backup.exists() and live.exists()]:
        if path.exists():
            raise BackupError(f"{path} is left from an earlier restore: move it elsewhere, then restore again")
    check = restore_database(source / "state.db", loaded.db_path, keep=kept_db)
    previous = f"; the previous one is {kept_db.name}" if kept_db.exists() else ""
    lines = [f"state.db      schema version {check.schema_version}, integrity ok{previous}"]
    for backup, live in replaced:
        lines.append(_restore_path(backup, live))
    config = loaded.home / "config.yaml"
    if not (source / "config.yaml").is_file():
        lines.append("config.yaml   not in the backup")
    elif config.exists():
        lines.append(f"config.yaml   yours is kept; the backup's copy is {source / 'config.yaml'}")
    else:
        _copy_private(source / "config.yaml", config)
        lines.append("config.yaml   restored (the home had none)")
        masked = manifest.get("masked_secrets", {}).get("config.yaml", {})
        needed = sorted({name for names in masked.values() for name in names.split(", ")})
        if needed:
            lines.append(f"              its secrets were masked in the backup: set {', '.join(needed)} "
                         f"(environment or {loaded.home / '.env'}) before starting")  # fmt: skip
    return lines


def _restore_path(backup: Path, live: Path) -> str:
    label = (live.name + ("/" if backup.is_dir() or live.is_dir() else "")).ljust(13)
    if not backup.exists():
        return f"{label} not in the backup; the home's is unchanged"
    note = ""
    if live.exists():
        os.replace(live, _kept(live))
        note = f"; the previous {'ones are in' if backup.is_dir() else 'one is'} {_kept(live).name}"
    if backup.is_dir():
        from agent import make_private_dirs  # not at the top: every CLI start loads this module

        live.mkdir(mode=0o700)
        files = sorted(p.relative_to(backup) for p in backup.rglob("*") if p.is_file())
        for relative in files:
            make_private_dirs(live / relative.parent)
            _copy_private(backup / relative, live / relative)
        return f"{label} {_files_count(len(files))} restored{note}"
    _copy_private(backup, live)
    return f"{label} restored{note}"


def _verify_manifest(source: Path) -> dict[str, Any]:
    """The backup's manifest, once every file it lists is there with the recorded digest."""
    manifest_path = source / MANIFEST
    if not manifest_path.is_file():
        raise BackupError(f"{source} is not a Switchboard backup (no {MANIFEST}); point at a {PREFIX}... directory")
    manifest: dict[str, Any] = json.loads(manifest_path.read_text(encoding="utf-8"))
    files = manifest.get("files", {})
    if "state.db" not in files:
        raise BackupError(f"{manifest_path} lists no state.db: the backup is incomplete")
    for name, expected in files.items():
        path = source / name
        if not path.is_file() or _digest(path) != expected:
            raise BackupError(f"{path} is missing or differs from {MANIFEST}: this backup was changed or is "
                              "incomplete; use another one")  # fmt: skip
    return manifest


# -- files -----------------------------------------------------------------------------------------


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _digest(path: Path) -> dict[str, object]:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return {"size": path.stat().st_size, "sha256": sha.hexdigest()}


def _copy_private(source: Path, target: Path) -> None:
    """Copy one file to a new 0600 file (never following into an existing one), keeping its modification time."""
    with source.open("rb") as data:  # first: a source gone meanwhile leaves no empty copy behind
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(data, out)
            out.flush()
            os.fsync(out.fileno())
            modified = os.fstat(data.fileno()).st_mtime_ns
    os.chmod(target, 0o600)
    os.utime(target, ns=(modified, modified))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _free_name(parent: Path, name: str) -> Path:
    candidate, number = parent / name, 1
    while candidate.exists() or candidate.with_name(f".{candidate.name}.partial").exists():
        number += 1
        candidate = parent / f"{name}-{number}"
    return candidate


def _files_count(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def _kept(path: Path) -> Path:
    return path.with_name(path.name + KEPT)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error)
