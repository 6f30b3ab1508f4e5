"""Receiving that only one process may do at a time: the right to hold such a connection.

Some ways of receiving take a connection that the platform lets only one client hold (Telegram's
``getUpdates`` long polling, Discord's gateway WebSocket, Slack's Socket Mode). When several gateway
processes serve the same bots, each still sends (every adapter starts without receiving, see
``Adapter.start``), and the gateway hands one of them an :class:`Ownership` while that process holds the
connection's lease (``Adapter.start_receiving``). The adapter asks :attr:`Ownership.held` before each
receive and each hand-over to intake, and stops receiving as soon as it says False: a process that was
frozen or cut off past its lease's expiry must not take events another process now receives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass


async def _nowhere(progress: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Ownership:
    """The right to hold one receiving connection, as long as :attr:`held` says so."""

    lease: str
    """The connection's name (``Adapter.receiving_lease``)."""
    fence: int
    """The lease's fencing number for this holder (grows with every new holder)."""
    held: Callable[[], bool]
    """Whether the right still holds as far as this process can tell without waiting for anyone (its
    registration is alive, the lease is not known to have moved): asked before every receive and every
    hand-over to intake. False: stop receiving at once, hand nothing more over and record nothing."""
    progress: str | None = None
    """What the previous holder recorded (Telegram: the next update id wanted), or None."""
    record: Callable[[str], Awaitable[bool]] = _nowhere
    """Store the adapter's progress with the lease's fence, for the next holder; False when the lease moved on
    (then stop receiving)."""
