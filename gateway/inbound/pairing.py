"""Pairing: how an unknown user gets access without the operator editing config.

An unknown user who DMs the bot gets a one-time code: 8 characters from an
alphabet without look-alikes (no 0/O, 1/I), valid for an hour, at most one new
code per user every 10 minutes (however many messages arrive at once). The
operator approves it with ``switchboard pairing approve PLATFORM CODE``; spaces
and hyphens typed into the code are ignored, and approving a user uses up any
other code they still hold. Five wrong approvals within an hour on a platform
lock approvals there for an hour from the fifth, so codes cannot be guessed;
the operator lifts such a lock at once with ``switchboard pairing unlock PLATFORM``.
Approvals live in the database; ``switchboard pairing revoke`` takes one back.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import structlog

from storage import PairingCode, StorageEngine

log = structlog.get_logger("gateway.pairing")

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = 3600.0
REQUEST_INTERVAL = 600.0
MAX_FAILURES = 5
LOCKOUT = 3600.0


class ApprovalOutcome(StrEnum):
    APPROVED = "approved"
    UNKNOWN_CODE = "unknown_code"
    LOCKED = "locked"


@dataclass(frozen=True, slots=True)
class Approval:
    outcome: ApprovalOutcome
    user_id: str | None = None
    user_name: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class Unlock:
    was_locked: bool
    """Whether approvals on the platform were locked when the operator unlocked them."""
    cleared: int
    """How many failed approvals were forgotten."""


def unlock_hint(platform: str) -> str:
    """The shell command that lifts a lockout, as the messages name it."""
    return f"switchboard pairing unlock {platform}"


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalise_code(typed: str) -> str:
    """The code as stored: upper case, without the spaces or hyphens a person may type into it."""
    return "".join(typed.split()).replace("-", "").upper()


def locked_until(failures: list[float]) -> float | None:
    """When the newest lockout ends: an hour after any failure that made five within an hour (oldest first)."""
    until = None
    for newest in range(MAX_FAILURES - 1, len(failures)):
        if failures[newest] - failures[newest - MAX_FAILURES + 1] < LOCKOUT:
            until = failures[newest] + LOCKOUT
    return until


class Pairing:
    def __init__(self, store: StorageEngine, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    async def is_approved(self, platform: str, user_id: str) -> bool:
        return await self._store.pairing.is_approved(platform, user_id)

    async def offer(self, platform: str, user_id: str, user_name: str, chat_id: str) -> str | None:
        """A code for this user, or None if one was issued less than 10 minutes ago (no new message then)."""
        now = self._clock()
        code = new_code()
        added = await self._store.pairing.add_code(
            PairingCode(code=code, platform=platform, user_id=user_id, user_name=user_name, chat_id=chat_id,
                        created_at=now, expires_at=now + CODE_TTL),
            unless_offered_since=now - REQUEST_INTERVAL,
        )  # fmt: skip
        if not added:
            log.debug("pairing.rate_limited", platform=platform, user=user_id)
            return None
        log.info("pairing.code_issued", platform=platform, user=user_id)
        return code

    async def approve(self, platform: str, code: str) -> Approval:
        now = self._clock()
        failures = await self._store.pairing.failure_times(platform, now - 2 * LOCKOUT)
        until = locked_until(failures)
        if until is not None and until > now:
            minutes = max(1, round((until - now) / 60))
            return Approval(
                ApprovalOutcome.LOCKED,
                message=f"approvals for {platform} are locked after {MAX_FAILURES} wrong codes within an hour; "
                f"try again in {minutes} minute{'s' if minutes != 1 else ''}, or lift the lock now with: "
                f"{unlock_hint(platform)}",
            )
        taken = await self._store.pairing.take_code(platform, normalise_code(code), now)
        if taken is None:
            await self._store.pairing.record_failure(platform, now)
            recent = sum(1 for failed_at in failures if failed_at > now - LOCKOUT)
            left = MAX_FAILURES - recent - 1
            locked = f"approvals for {platform} are now locked for an hour (lift the lock with: {unlock_hint(platform)})"
            then = f"{left} tries left this hour" if left > 0 else locked
            return Approval(
                ApprovalOutcome.UNKNOWN_CODE,
                message=f"no valid {platform} code {code!r} (it may have expired or been used); {then}",
            )
        await self._store.pairing.approve(platform, taken.user_id, taken.user_name, now)
        log.info("pairing.approved", platform=platform, user=taken.user_id)
        return Approval(ApprovalOutcome.APPROVED, taken.user_id, taken.user_name, message="approved")

    async def unlock(self, platform: str) -> Unlock:
        """Lift a lockout: forget the platform's failed approvals, so the next code is checked at once."""
        now = self._clock()
        until = locked_until(await self._store.pairing.failure_times(platform, now - 2 * LOCKOUT))
        cleared = await self._store.pairing.clear_failures(platform)
        unlock = Unlock(was_locked=until is not None and until > now, cleared=cleared)
        log.info("pairing.unlocked", platform=platform, was_locked=unlock.was_locked, failures_cleared=cleared)
        return unlock

    async def revoke(self, platform: str, user_id: str) -> bool:
        revoked = await self._store.pairing.revoke(platform, user_id)
        if revoked:
            log.info("pairing.revoked", platform=platform, user=user_id)
        return revoked


def pairing_message(code: str, platform: str, user_id: str) -> str:
    return (
        "Hi! I don't know you yet, so I can't answer your messages.\n\n"
        f"Your pairing code: {code}\n"
        f"Your {platform} user id: {user_id}\n\n"
        "Send the code to the person who runs this bot. They can let you in with:\n"
        f"switchboard pairing approve {platform} {code}\n\n"
        "The code is valid for one hour."
    )
