"""Which session a message belongs to.

A session is one conversation with the agent. Its routing key comes from the
platform, the chat type, the chat, the thread, and, in groups when
``sessions.group_per_user`` is on, the user:

=============================  ==========================================
message                        key
=============================  ==========================================
Telegram DM                    ``telegram:dm:<chat>``
Telegram group, per user       ``telegram:group:<chat>:user:<user>``
Telegram forum topic           ``telegram:group:<chat>:thread:<topic>``
Discord thread                 ``discord:group:<channel>:thread:<thread>``
Slack thread                   ``slack:group:<channel>:thread:<ts>``
=============================  ==========================================

Threads and topics are shared by everyone in them (a thread is one
conversation); outside threads each user in a group gets their own session,
so one person's context never leaks into another's.

A session that is one person's (a DM, a per-user group session) carries that
person's id in ``user_id``; it becomes part of the key's text only in groups
(a DM chat is one person's already), and it decides whose memory the session
uses (:mod:`gateway.turn.memory_scope`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adapters.contract import ChatType, InboundMessage


@dataclass(frozen=True, slots=True)
class SessionKey:
    platform: str
    chat_type: ChatType
    chat_id: str
    thread_id: str | None = None
    user_id: str | None = None
    """The person a DM or a per-user group session belongs to; None for a shared session."""
    _text: str = field(init=False, repr=False, compare=False)
    """The key as text, made once: a turn uses it several times (``ChatType.value`` is slow to read)."""

    def __post_init__(self) -> None:
        parts = [self.platform, self.chat_type.value, self.chat_id]
        if self.thread_id is not None:
            parts += ["thread", self.thread_id]
        if self.user_id is not None and self.chat_type is not ChatType.DM:
            parts += ["user", self.user_id]
        object.__setattr__(self, "_text", ":".join(parts))

    @property
    def shared(self) -> bool:
        """Several people talk in this session: a group thread or topic, or a whole group when
        ``group_per_user`` is off."""
        return self.user_id is None and self.chat_type is not ChatType.DM

    def __str__(self) -> str:
        return self._text


def session_key_for(message: InboundMessage, *, group_per_user: bool = True) -> SessionKey:
    personal = message.chat_type is ChatType.DM or (group_per_user and message.thread_id is None)
    return SessionKey(
        platform=message.platform,
        chat_type=message.chat_type,
        chat_id=message.chat_id,
        thread_id=message.thread_id,
        user_id=message.user_id if personal else None,
    )
