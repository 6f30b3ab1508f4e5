"""``/memory`` and ``/forget``: what the bot keeps about a person or a shared conversation, and deleting it.

``/memory``
    In a DM: the sender's profile and notes, listed. In a group the answer is seen by everyone,
    so the sender's own memory is not listed there (they are pointed to a DM); in a shared
    conversation (a thread, a topic, a group with ``group_per_user`` off) its notes are listed,
    since everyone in it has them in their prompts anyway.

``/forget``
    Deletes the sender's own memory, wherever it is sent, and starts the conversation afresh;
    their other sessions start afresh at their next message (their prompts were frozen with
    the deleted entries, see ``Conversations.memory_outdated``).

``/forget here``
    In a shared conversation: deletes that conversation's notes. Anyone who may talk to the bot
    there may do it, because anyone there can already have the model change or remove them; the
    reply names who did it, and the log has it (``memory.forgotten``).

Neither command touches the operator's shared layer (``memories/shared/``) or the stored
conversation history.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from adapters.contract import ChatType, InboundMessage
from agent import MemoryBank, MemoryScope, MemoryStore, MemoryTarget
from gateway.commands.parsing import Command
from gateway.turn.conversations import Conversations
from gateway.inbound.lanes import Lanes
from gateway.turn.memory_scope import scope_for_key
from gateway.inbound.session_key import SessionKey

log = structlog.get_logger("gateway.memory")

LABELS = {
    "person": {MemoryTarget.USER: "Profile", MemoryTarget.MEMORY: "Notes"},
    "conversation": {MemoryTarget.MEMORY: "Notes", MemoryTarget.USER: "About the people here"},
}
PRIVATE_IN_GROUPS = (
    "What I keep about you personally is private, so I don't list it in a group: "
    "send /memory to me in a direct message to see it."
)
FORGET_USAGE = (
    "Send /forget to delete what I keep about you, or /forget here in a shared thread to delete "
    "that conversation's notes."
)


class MemoryCommands:
    def __init__(
        self,
        memories: MemoryBank,
        conversations: Conversations,
        lanes: Lanes[InboundMessage],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._memories = memories
        self._conversations = conversations
        self._lanes = lanes
        self._clock = clock

    async def show(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        """``/memory``."""
        if key.shared:
            listed = await self._listing(scope_for_key(key))
            if not listed:
                return "I keep no notes about this conversation.\n\n" + PRIVATE_IN_GROUPS
            return (
                "Notes about this conversation (shared by everyone in it):\n\n" + listed + "\n\n"
                + PRIVATE_IN_GROUPS + "\n/forget here deletes this conversation's notes."
            )  # fmt: skip
        if message.chat_type is not ChatType.DM:
            return PRIVATE_IN_GROUPS + " /forget deletes it, here or there."
        listed = await self._listing(_person(message))
        if not listed:
            return "I keep nothing about you yet. What I save to remember you by will show up here."
        return (
            f"What I keep about you ({message.platform} user {message.user_id}):\n\n{listed}\n\n"
            "Send /forget to delete all of it."
        )

    async def forget(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        """``/forget`` and ``/forget here``."""
        here = command.args.strip().lower()
        if here not in ("", "here"):
            return FORGET_USAGE
        if here and key.shared:
            removed = await self._forget(scope_for_key(key), message, key, reset=True)
            if not removed:
                return "This conversation has no notes to delete."
            who = message.user_name or message.user_id
            return (
                f"Deleted this conversation's notes ({_entries(removed)}), as {who} asked. "
                "The conversation starts afresh from the next message."
            )
        removed = await self._forget(_person(message), message, key, reset=not key.shared)
        if not removed:
            return "I keep nothing about you, so there was nothing to delete."
        afresh = "your other conversations with me" if key.shared else "this and your other conversations with me"
        return f"Deleted everything I kept about you ({_entries(removed)}); {afresh} start afresh from the next message."

    async def _forget(self, scope: MemoryScope, message: InboundMessage, key: SessionKey, *, reset: bool) -> int:
        """Delete ``scope``'s memory; with ``reset``, stop and end this conversation's session too."""
        store = self._memories.store(scope)
        held = sum(len(entries) for entries in (await asyncio.to_thread(_entries_of, store)).values())
        if not held:
            return 0
        if reset:
            self._lanes.stop(str(key))  # a turn still running could save again what is being deleted
        removed = await asyncio.to_thread(self._memories.forget, scope, self._clock())
        if reset:
            await self._conversations.reset(key, "forgotten")
        count = sum(removed.values())
        log.info("memory.forgotten", platform=message.platform, user=message.user_id, scope=scope.kind,
                 folder=str(scope.folder), entries=count)  # fmt: skip
        return count

    async def _listing(self, scope: MemoryScope) -> str:
        """The scope's entries under their labels; ``""`` when it holds none."""
        entries = await asyncio.to_thread(_entries_of, self._memories.store(scope))
        labels = LABELS[scope.kind]
        blocks = [
            f"{labels[target]}:\n" + "\n".join(f"• {entry}" for entry in entries[target])
            for target in labels
            if entries[target]
        ]
        return "\n\n".join(blocks)


def _person(message: InboundMessage) -> MemoryScope:
    return MemoryScope.person(message.platform, message.user_id)


def _entries_of(store: MemoryStore) -> dict[MemoryTarget, list[str]]:
    return {target: store.entries(target) for target in MemoryTarget}


def _entries(count: int) -> str:
    return "1 entry" if count == 1 else f"{count} entries"
