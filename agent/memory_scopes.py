"""Whose memory a session sees and writes: a folder per person or shared conversation, and the
operator's shared layer, all under ``<home>/memories``::

    shared/MEMORY.md, USER.md         the operator's notes for everyone: in every prompt,
                                      edited on disk only (the memory tool cannot reach them)
    users/<namespace>/<person>/       one person's notes and profile
    chats/<namespace>/<chat>/         a chat where everyone talks in one conversation
    threads/<namespace>/<chat>/<thread>/  one shared thread or topic
    legacy-<date>/                    the one global MEMORY.md and USER.md of earlier versions,
                                      moved aside once by :func:`move_legacy`; nothing loads them

The caller decides whose a session is and passes a :class:`MemoryScope`; to the agent a
namespace (the gateway uses the platform's name) and the ids are only names. Each becomes one
path segment through :func:`safe_segment`, so no id can climb out of its folder, reach a hidden
file or share a folder with another id. Each folder is a :class:`agent.memory.MemoryStore`, with
the same caps, frozen snapshots and file lock as ever::

    bank = MemoryBank(home / "memories")
    scope = MemoryScope.person("telegram", "42")
    bank.snapshot(scope)                 # the shared layer, then this person's blocks
    bank.store(scope).add(MemoryTarget.USER, "Prefers metric units.")
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import structlog

from agent.data_framing import MEMORY_TAG, PROJECT_TAG
from agent.memory import DEFAULT_MEMORY_CHARS, DEFAULT_USER_CHARS, MemorySnapshot, MemoryStore, MemoryTarget

log = structlog.get_logger("agent.memory")

ScopeKind = Literal["person", "conversation"]

SHARED_DIR: Final = "shared"
LEGACY_PREFIX: Final = "legacy-"
MAX_SEGMENT: Final = 100
_SAFE_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")

HEADINGS: Final[dict[str, dict[MemoryTarget, str]]] = {
    "person": {
        MemoryTarget.MEMORY: "NOTES (yours, from conversations with this person)",
        MemoryTarget.USER: "PROFILE (what you know about this person)",
    },
    "conversation": {
        MemoryTarget.MEMORY: "NOTES (yours, about this shared conversation; everyone in it sees them)",
        MemoryTarget.USER: "PEOPLE (what you know about the people in this shared conversation)",
    },
    "shared": {
        MemoryTarget.MEMORY: "SHARED NOTES (from the operator, for every conversation; you cannot change them)",
        MemoryTarget.USER: "ABOUT EVERYONE (from the operator, true of every user; you cannot change it)",
    },
}

LEGACY_HEADINGS: Final = ("MEMORY (notes you keep for yourself) — ", "USER PROFILE (what you know about the user) — ")
"""How earlier versions headed the one global memory in every prompt (see :func:`holds_legacy_memory`)."""


def safe_segment(value: str) -> str:
    """``value`` as one path segment, the same value always the same segment and two never one.

    Letters, digits, ``-``, ``_`` and ``.`` are kept; every other byte of the UTF-8 form,
    and a leading ``.``, is written ``%XX``; so ``..`` becomes ``%2E.`` and ``a/b`` becomes
    ``a%2Fb``. A segment longer than 100 characters becomes ``%h`` and the SHA-256 of
    ``value`` (``%h`` cannot come out of the encoding, so it never meets a short id).
    """
    if not value:
        raise ValueError("an id for a memory folder cannot be empty")
    raw = value.encode("utf-8", errors="surrogatepass")
    encoded = "".join(chr(b) if b in _SAFE_BYTES else f"%{b:02X}" for b in raw)
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > MAX_SEGMENT:
        return "%h" + hashlib.sha256(raw).hexdigest()
    return encoded


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory: one person's, or one shared conversation's (a whole chat, or a thread in it)."""

    kind: ScopeKind
    ids: tuple[str, ...]
    """The namespace first, then the person, or the chat and maybe the thread."""

    @classmethod
    def person(cls, namespace: str, person_id: str) -> MemoryScope:
        return cls("person", (namespace, person_id))

    @classmethod
    def conversation(cls, namespace: str, chat_id: str, thread_id: str | None = None) -> MemoryScope:
        return cls("conversation", (namespace, chat_id) if thread_id is None else (namespace, chat_id, thread_id))

    @property
    def folder(self) -> Path:
        """The scope's folder, relative to the memories root."""
        top = "users" if self.kind == "person" else ("threads" if len(self.ids) == 3 else "chats")
        return Path(top, *(safe_segment(part) for part in self.ids))


MAX_REMEMBERED_FORGETS: Final = 4096


class MemoryBank:
    """Every scope's memory under one root (``<home>/memories``), and the shared layer."""

    def __init__(
        self, root: Path, *, memory_chars: int = DEFAULT_MEMORY_CHARS, user_chars: int = DEFAULT_USER_CHARS
    ) -> None:
        self.root = root
        self._limits = {"memory_chars": memory_chars, "user_chars": user_chars}
        self._forgotten: OrderedDict[MemoryScope, float | None] = OrderedDict()
        """When each recently asked scope was forgotten (None: never), so a turn reads no file for it."""

    def store(self, scope: MemoryScope) -> MemoryStore:
        """The scope's folder as a store (for the memory tool, ``/memory`` and ``/forget``)."""
        return MemoryStore(self.root / scope.folder, **self._limits)

    @property
    def shared(self) -> MemoryStore:
        """The operator's layer. Read for every prompt; the agent never hands it to a tool."""
        return MemoryStore(self.root / SHARED_DIR, **self._limits)

    def snapshot(self, scope: MemoryScope | None) -> MemorySnapshot:
        """The shared layer's blocks, then the scope's (none when ``scope`` is None)."""
        shared = self.shared.snapshot(HEADINGS["shared"], usage=False)
        return shared if scope is None else shared + self.store(scope).snapshot(HEADINGS[scope.kind])

    def forget(self, scope: MemoryScope, now: float) -> dict[MemoryTarget, int]:
        """Delete the scope's files (:meth:`MemoryStore.forget`); how many entries each held."""
        removed = self.store(scope).forget(now)
        self._remember(scope, now)
        return removed

    def forgotten_at(self, scope: MemoryScope) -> float | None:
        """When the scope was last forgotten, None if never; read from disk once per scope, then kept."""
        if scope in self._forgotten:
            self._forgotten.move_to_end(scope)
            return self._forgotten[scope]
        when = self.store(scope).forgotten_at()
        self._remember(scope, when)
        return when

    def _remember(self, scope: MemoryScope, when: float | None) -> None:
        self._forgotten[scope] = when
        self._forgotten.move_to_end(scope)
        while len(self._forgotten) > MAX_REMEMBERED_FORGETS:
            self._forgotten.popitem(last=False)


# --- the global memory of earlier versions -------------------------------------------------------


def move_legacy(root: Path, today: dt.date) -> tuple[Path, list[str]] | None:
    """Move a global ``MEMORY.md`` / ``USER.md`` left directly in ``root`` to ``legacy-<date>/``.

    Earlier versions showed those two files to everyone; nothing loads them once moved. Returns
    the folder and the names moved, or None when there was nothing to move. Holds the old
    store's lock, so a write of an older process still running lands before or not at all.
    """
    legacy = MemoryStore(root)
    names = [target.file_name for target in MemoryTarget]
    if not any(legacy.path(target).exists() for target in MemoryTarget):
        return None
    with legacy.locked():
        present = [name for name in names if (root / name).exists()]
        if not present:
            return None
        target = _free_folder(root, f"{LEGACY_PREFIX}{today.isoformat()}")
        target.mkdir(mode=0o700)
        for name in present:
            os.replace(root / name, target / name)
    return target, present


def _free_folder(root: Path, name: str) -> Path:
    candidate, number = root / name, 1
    while candidate.exists():
        number += 1
        candidate = root / f"{name}-{number}"
    return candidate


def holds_legacy_memory(prompt: str) -> bool:
    """True for a system prompt an earlier version built with the global memory in it.

    Text inside this version's data frames does not count: a saved entry or a project file
    quoting an old heading must not make every new session look like an old one.
    """
    if not any(heading in prompt for heading in LEGACY_HEADINGS):
        return False
    outside = _FRAMED.sub("", prompt)
    return any(heading in outside for heading in LEGACY_HEADINGS)


_FRAMED: Final = re.compile(rf"<({re.escape(MEMORY_TAG)}|{re.escape(PROJECT_TAG)})>\n.*?\n</\1>", re.DOTALL)
