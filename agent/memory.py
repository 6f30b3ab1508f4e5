"""Long-term memory files in one folder: ``MEMORY.md`` (the agent's notes) and ``USER.md`` (the profile).

Each file is a list of short entries separated by a line holding only ``§``
(``"\\n§\\n"``). Both are capped in characters, not tokens, so the cap means
the same for every model: 2,200 for ``MEMORY.md`` and 1,375 for ``USER.md``.
A write that would overflow is refused and the current entries are returned, so
the model can consolidate them; nothing is ever dropped automatically.

Whose folder a session uses (one person's, one shared conversation's, the operator's
shared layer) is decided by :mod:`agent.memory_scopes`; this module is one folder.

The system prompt shows a *snapshot* taken at session start. Writes go to disk
at once but only reach the prompt in the next session, which keeps the prompt
byte-stable for caching::

    store = MemoryStore(home / "memories" / "users" / "telegram" / "42")
    snapshot = store.snapshot(headings)         # frozen into this session's prompt
    store.add(MemoryTarget.USER, "Prefers metric units.")
    snapshot.text                               # unchanged
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

import structlog

from agent.injection import scan_text

log = structlog.get_logger("agent.memory")

ENTRY_DELIMITER: Final = "\n§\n"
DEFAULT_MEMORY_CHARS: Final = 2_200
DEFAULT_USER_CHARS: Final = 1_375
LOCK_FILE: Final = ".lock"
FORGOTTEN_FILE: Final = ".forgotten"
_DELIMITER_LINE = re.compile(r"^[ \t]*§[ \t]*\r?$", re.MULTILINE)


class MemoryTarget(StrEnum):
    """Which file an entry belongs to."""

    MEMORY = "memory"
    """The agent's own notes: environment facts, conventions, lessons learned."""
    USER = "user"
    """Facts about the user: name, preferences, how they like to be answered."""

    @property
    def file_name(self) -> str:
        return "MEMORY.md" if self is MemoryTarget.MEMORY else "USER.md"


def parse_entries(text: str) -> list[str]:
    """The entries of a memory file: trimmed, non-empty, duplicates dropped (first kept)."""
    entries = (part.strip() for part in _DELIMITER_LINE.split(text.lstrip("\ufeff")))
    return list(dict.fromkeys(entry for entry in entries if entry))


def joined_size(entries: Sequence[str]) -> int:
    """The characters ``entries`` take on disk, delimiters included."""
    return len(ENTRY_DELIMITER.join(entries))


def _usage(used: int, limit: int) -> str:
    return f"{used:,}/{limit:,} chars"


@dataclass(frozen=True, slots=True)
class MemoryResult:
    """What a memory write did, in terms the model can act on."""

    ok: bool
    message: str
    target: MemoryTarget
    used: int
    limit: int
    entries: tuple[str, ...] = ()
    """The current entries, included when the model has to choose or consolidate."""

    @property
    def usage(self) -> str:
        return _usage(self.used, self.limit)


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """The memory blocks frozen into one session's system prompt."""

    text: str = ""
    """The blocks, each a heading line and its entries; ``""`` when nothing is saved."""
    notices: tuple[str, ...] = field(default=(), compare=False)
    """Entries withheld from the prompt because they failed the injection scan."""

    def __add__(self, other: MemorySnapshot) -> MemorySnapshot:
        """Both snapshots' blocks, this one's first."""
        text = "\n\n".join(part for part in (self.text, other.text) if part)
        return MemorySnapshot(text, (*self.notices, *other.notices))


def render_block(heading: str, entries: Sequence[str], usage: str | None = None) -> str:
    """A heading (with the fill level, when given), then the entries; ``""`` for no entries."""
    if not entries:
        return ""
    header = f"{heading} — {usage}" if usage else heading
    return header + "\n" + ENTRY_DELIMITER.join(entries)


class MemoryStore:
    """The two memory files in one directory (one scope's folder under ``<home>/memories``).

    Methods are synchronous and safe across threads and processes: every write
    holds an exclusive lock on ``<directory>/.lock`` and replaces the file atomically.
    """

    def __init__(
        self,
        directory: Path,
        *,
        memory_chars: int = DEFAULT_MEMORY_CHARS,
        user_chars: int = DEFAULT_USER_CHARS,
    ) -> None:
        self.directory = directory
        self._limits = {MemoryTarget.MEMORY: memory_chars, MemoryTarget.USER: user_chars}

    def path(self, target: MemoryTarget) -> Path:
        return self.directory / target.file_name

    def limit(self, target: MemoryTarget) -> int:
        return self._limits[target]

    def entries(self, target: MemoryTarget) -> list[str]:
        """The entries on disk now (not the session's snapshot)."""
        try:
            return parse_entries(self.path(target).read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            return []

    def snapshot(self, headings: Mapping[MemoryTarget, str], *, usage: bool = True) -> MemorySnapshot:
        """Both files as they are on disk now under ``headings``, suspicious entries withheld.

        ``usage``: show each file's fill level after its heading (the model writing the file
        needs it; a layer it cannot write does not).
        """
        blocks: list[str] = []
        notices: list[str] = []
        for target in MemoryTarget:
            entries = self.entries(target)
            shown = [self._screen(target, entry, notices) for entry in entries]
            fill = _usage(joined_size(entries), self.limit(target)) if usage else None
            blocks.append(render_block(headings[target], shown, fill))
        return MemorySnapshot("\n\n".join(block for block in blocks if block), tuple(notices))

    def _screen(self, target: MemoryTarget, entry: str, notices: list[str]) -> str:
        findings = scan_text(entry, "strict")
        if not findings:
            return entry
        reasons = ", ".join(findings)
        notices.append(f"An entry in {target.file_name} was withheld ({reasons}).")
        log.warning("agent.memory.entry_blocked", file=target.file_name, findings=reasons)
        return (
            f"[BLOCKED: an entry in {target.file_name} was withheld from this prompt because it "
            f"looks like a prompt injection ({reasons}). It stays in the file until it is removed.]"
        )

    # --- writes ---------------------------------------------------------------------------------

    def add(self, target: MemoryTarget, content: str) -> MemoryResult:
        """Append one entry, unless it is invalid, already there, or would overflow."""
        content = content.strip()
        with self.locked():
            entries = self.entries(target)
            if (problem := self._invalid(target, content, entries)) is not None:
                return problem
            if content in entries:
                return self._result(target, entries, True, "That entry is already saved; nothing changed.")
            return self._commit(target, entries, [*entries, content], "Saved.")

    def replace(self, target: MemoryTarget, old_text: str, content: str) -> MemoryResult:
        """Replace the one entry containing ``old_text`` with ``content``."""
        content = content.strip()
        with self.locked():
            entries = self.entries(target)
            found = self._find(target, entries, old_text)
            if isinstance(found, MemoryResult):
                return found
            if (problem := self._invalid(target, content, entries)) is not None:
                return problem
            updated = list(dict.fromkeys(content if i == found else e for i, e in enumerate(entries)))
            return self._commit(target, entries, updated, "Updated.")

    def remove(self, target: MemoryTarget, old_text: str) -> MemoryResult:
        """Delete the one entry containing ``old_text``."""
        with self.locked():
            entries = self.entries(target)
            found = self._find(target, entries, old_text)
            if isinstance(found, MemoryResult):
                return found
            return self._commit(target, entries, [e for i, e in enumerate(entries) if i != found], "Removed.")

    def forget(self, now: float) -> dict[MemoryTarget, int]:
        """Delete both files; returns how many entries each held.

        The time is kept in ``.forgotten`` (:meth:`forgotten_at`), so sessions whose prompts
        were frozen with the old entries can be told apart from those started since.
        """
        with self.locked():
            removed = {target: len(self.entries(target)) for target in MemoryTarget}
            for target in MemoryTarget:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path(target))
            self._replace_file(FORGOTTEN_FILE, repr(now) + "\n")
        log.info("agent.memory.forgotten", directory=self.directory.name, entries=sum(removed.values()))
        return removed

    def forgotten_at(self) -> float | None:
        """When :meth:`forget` last ran here (its ``now``); None when it never did."""
        try:
            return float((self.directory / FORGOTTEN_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def _invalid(self, target: MemoryTarget, content: str, entries: list[str]) -> MemoryResult | None:
        if not content:
            return self._result(target, entries, False, "The entry is empty; nothing was saved.")
        if _DELIMITER_LINE.search(content):
            return self._result(target, entries, False, "An entry can't contain a line holding only '§'.")
        if findings := scan_text(content, "strict"):
            log.warning("agent.memory.write_blocked", file=target.file_name, findings=",".join(findings))
            return self._result(
                target,
                entries,
                False,
                f"Refused: the entry matches a prompt-injection pattern ({', '.join(findings)}). "
                "Saved memory enters the system prompt of later conversations, so it must hold plain facts only.",
            )
        if len(content) > self.limit(target):
            return self._result(
                target,
                entries,
                False,
                f"The entry is {len(content):,} chars, more than {target.file_name} can hold "
                f"({self.limit(target):,}). Save a shorter summary.",
            )
        return None

    def _find(self, target: MemoryTarget, entries: list[str], old_text: str) -> int | MemoryResult:
        needle = old_text.strip()
        if not needle:
            return self._result(target, entries, False, "Say which entry: old_text is empty.", shown=entries)
        matches = [i for i, entry in enumerate(entries) if needle in entry]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            message = f"No entry in {target.file_name} contains {needle!r}."
            return self._result(target, entries, False, message, shown=entries)
        message = f"{len(matches)} entries contain {needle!r}; quote more of the one you mean."
        return self._result(target, entries, False, message, shown=[entries[i] for i in matches])

    def _commit(self, target: MemoryTarget, before: list[str], after: list[str], message: str) -> MemoryResult:
        used, limit, current = joined_size(after), self.limit(target), joined_size(before)
        if used > limit and used > current:  # a change that shrinks an over-full file is always allowed
            return self._result(
                target,
                before,
                False,
                f"{target.file_name} holds {_usage(current, limit)}; this change would bring it to "
                f"{used:,}. Nothing was saved. Make room first: merge related entries with replace "
                "or remove ones that no longer matter, then try again.",
                shown=before,
            )
        self._write(target, after)
        log.info("agent.memory.written", file=target.file_name, entries=len(after), chars=used, limit=limit)
        return MemoryResult(True, message, target, used, limit)

    def _result(
        self, target: MemoryTarget, entries: Sequence[str], ok: bool, message: str, *, shown: Sequence[str] = ()
    ) -> MemoryResult:
        """A result for an unchanged file holding ``entries``; ``shown`` lists entries for the model."""
        return MemoryResult(ok, message, target, joined_size(entries), self.limit(target), tuple(shown))

    # --- files ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's lock (exclusive), as every write does. Makes the folder if needed."""
        make_private_dirs(self.directory)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _write(self, target: MemoryTarget, entries: Sequence[str]) -> None:
        self._replace_file(target.file_name, ENTRY_DELIMITER.join(entries) + ("\n" if entries else ""))

    def _replace_file(self, name: str, text: str) -> None:
        """Write ``name`` in the folder atomically, 0600 (the caller holds the lock)."""
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self.directory / name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise


def make_private_dirs(directory: Path) -> None:
    """Make ``directory`` and each missing parent 0700 (``mkdir(parents=True)`` leaves parents to the umask)."""
    missing = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)
