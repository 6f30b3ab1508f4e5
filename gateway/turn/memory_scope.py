"""Whose memory a session uses: the gateway's rule, given to the agent as a ``MemoryScope``.

=======================================================  ==========================================
session                                                  memory (under ``<home>/memories/``)
=======================================================  ==========================================
a DM (and a thread inside a DM)                          ``users/<platform>/<user>/``
a group with ``group_per_user`` on, outside threads      ``users/<platform>/<user>/`` (the same)
a thread or topic; a group with ``group_per_user`` off   ``threads/<platform>/<chat>/<thread>/``
                                                         or ``chats/<platform>/<chat>/``
=======================================================  ==========================================

So what someone tells the bot follows them between their DM and their own group sessions
on one platform and reaches nobody else, and what is said in a shared thread stays with
that thread. The same scope keeps a session's ``session_search`` to those sessions
(:func:`search_owner`). The scope is worked out from the stored session alone, so a session reopened
after a restart writes where it did before. Sessions stored by earlier versions recorded no
user for a DM; such a session has no scope (:func:`scope_for_record` returns None) and is
started afresh (``gateway.turn.conversations``).

Earlier versions kept one ``memories/MEMORY.md`` and ``memories/USER.md`` for everyone. At
start they are moved, once, to ``memories/legacy-<date>/``, where nothing loads them, with a
``memory.legacy_moved`` warning saying how to reuse their lines (:func:`move_global_memory`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import structlog

from adapters.contract import ChatType
from agent import MemoryScope, move_legacy
from gateway.inbound.session_key import SessionKey
from storage import SearchOwner, SessionRecord

log = structlog.get_logger("gateway.memory")


def scope_for_key(key: SessionKey) -> MemoryScope:
    """The memory of the session ``key`` routes to."""
    if key.user_id is not None:
        return MemoryScope.person(key.platform, key.user_id)
    return MemoryScope.conversation(key.platform, key.chat_id, key.thread_id)


def search_owner(scope: MemoryScope) -> SearchOwner:
    """The stored sessions whose past messages a session of ``scope`` may search: the same person's
    (sessions stored with their user id) or the same shared conversation's."""
    if scope.kind == "person":
        platform, user_id = scope.ids
        return SearchOwner(platform, user_id=user_id)
    platform, chat_id, *thread = scope.ids
    return SearchOwner(platform, chat_id=chat_id, thread_id=thread[0] if thread else None)


def scope_for_record(record: SessionRecord) -> MemoryScope | None:
    """The memory of a stored session; None for a DM stored without its user (earlier versions)."""
    if record.user_id is not None:
        return MemoryScope.person(record.platform, record.user_id)
    if record.chat_type == ChatType.DM.value:
        return None
    return MemoryScope.conversation(record.platform, record.chat_id, record.thread_id)


def move_global_memory(root: Path, clock: Callable[[], float]) -> Path | None:
    """Move the global memory files of earlier versions out of every prompt; where they went, or None."""
    moved = move_legacy(root, dt.datetime.fromtimestamp(clock()).date())
    if moved is None:
        return None
    folder, names = moved
    log.warning(
        "memory.legacy_moved",
        files=",".join(names),
        moved_to=str(folder),
        hint=(
            "earlier versions showed these files to everyone; nothing loads them now. To keep an entry "
            f"for everyone, copy it into {root / 'shared'}/MEMORY.md; for one person, into "
            f"{root / 'users'}/<platform>/<user id>/USER.md or MEMORY.md (entries are separated by a line "
            "holding only §)"
        ),
    )
    return folder
