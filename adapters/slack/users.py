"""Display names for the user ids Slack events carry, from ``users.info`` (scope ``users:read``).

Slack events name their sender only by id (``U012ABCDEF``); the gateway shows
the model, ``/whoami`` and pairing codes a name. :class:`UserNames` asks
``users.info`` once per user and keeps the answer: profile ``display_name``
first, then profile ``real_name``, then the account ``name``.

* The cache holds at most :data:`MAX_USERS` users, least recently used
  forgotten first, and a name for :data:`NAME_TTL` seconds, so a rename
  shows up within hours.
* Questions about one user while Slack is being asked share that one call.
* An event waits at most :data:`LOOKUP_TIMEOUT` seconds for a name (it sits
  inside the event's ack budget); past that the message goes on without a
  name while the call finishes in the background and fills the cache.
* A failed call (``missing_scope``, ``ratelimited``, a network error…)
  leaves the name empty (the gateway then shows the raw id) and is cached for
  :data:`FAILURE_TTL` seconds, so a failing API is not asked for every
  message. Each reason is logged once, with what to do about it.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import InboundMessage

log = structlog.get_logger(__name__)

MAX_USERS: Final = 5_000
NAME_TTL: Final = 4 * 3600.0
"""Seconds a looked-up name is used before Slack is asked again."""
FAILURE_TTL: Final = 60.0
"""Seconds a user whose lookup failed goes without a name before Slack is asked again."""
LOOKUP_TIMEOUT: Final = 1.0
"""Seconds an event waits for a name it does not have yet."""

_HINTS: Final = {
    "missing_scope": "add the users:read scope to the Slack app and reinstall it to show names",
    "ratelimited": "Slack rate-limits users.info; names come back once the limit passes",
    "user_not_found": "the user is not visible to the bot (another workspace?); the id is shown",
    "timeout": "users.info is slow; the message goes on without a name, which is cached once it arrives",
}
_QUIET: Final = frozenset({"ratelimited", "user_not_found", "timeout"})
"""Reasons that are expected now and then (logged at info rather than warning)."""


def pick_name(user: Mapping[str, Any]) -> str:
    """The name to show for a ``users.info`` ``user`` object, or '' when it has none."""
    profile = user.get("profile") if isinstance(user.get("profile"), Mapping) else {}
    for candidate in (profile.get("display_name"), profile.get("real_name"), user.get("name")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return ""


class UserNames:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_users: int = MAX_USERS,
        timeout: float = LOOKUP_TIMEOUT,
    ) -> None:
        self._client = client
        self._clock = clock
        self._max_users = max_users
        self._timeout = timeout
        self._names: OrderedDict[str, tuple[str, float]] = OrderedDict()
        """User id -> (name, '' after a failure; clock time until which it holds)."""
        self._lookups: dict[str, asyncio.Task[str]] = {}
        self._logged: set[str] = set()

    def cached(self, user_id: str) -> str | None:
        """The cached name ('' after a recent failure), or None when Slack needs asking."""
        entry = self._names.get(user_id)
        if entry is None:
            return None
        if self._clock() >= entry[1]:
            del self._names[user_id]
            return None
        self._names.move_to_end(user_id)
        return entry[0]

    async def name_of(self, user_id: str) -> str:
        """The user's display name, or '' when Slack cannot tell in time; never raises (except cancellation)."""
        if not user_id:
            return ""
        name = self.cached(user_id)
        if name is not None:
            return name
        lookup = self._lookups.get(user_id)
        if lookup is None:
            lookup = asyncio.create_task(self._look_up(user_id), name=f"slack-user-lookup:{user_id}")
            self._lookups[user_id] = lookup
            lookup.add_done_callback(lambda _task: self._lookups.pop(user_id, None))
        try:
            # shield: a caller that stops waiting leaves the shared call running, to fill the cache.
            return await asyncio.wait_for(asyncio.shield(lookup), self._timeout)
        except TimeoutError:
            self._note_failure("timeout", user_id, "no answer within the lookup timeout")
            return ""

    async def named(self, message: InboundMessage) -> InboundMessage:
        """The message with its sender's display name, when Slack tells it in time (a bot id has none)."""
        if message.user_name or not message.user_id.startswith(("U", "W")):  # B…: a bot id, not a user
            return message
        name = await self.name_of(message.user_id)
        return replace(message, user_name=name) if name else message

    async def _look_up(self, user_id: str) -> str:
        try:
            response = await self._client.users_info(user=user_id)
        except SlackApiError as error:
            reason = str(error.response.get("error") or f"http_{error.response.status_code}")
            return self._failed(user_id, reason, str(error))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a network failure only costs the name
            return self._failed(user_id, "network", f"{type(error).__name__}: {error}")
        user = response.get("user")
        name = pick_name(user) if isinstance(user, Mapping) else ""
        self._store(user_id, name, NAME_TTL)
        log.debug("slack.user.looked_up", user_id=user_id, found=bool(name))
        return name

    def _failed(self, user_id: str, reason: str, detail: str) -> str:
        self._store(user_id, "", FAILURE_TTL)
        self._note_failure(reason, user_id, detail)
        return ""

    def _note_failure(self, reason: str, user_id: str, detail: str) -> None:
        if reason in self._logged:
            return
        self._logged.add(reason)
        hint = _HINTS.get(reason, "check the bot token and Slack's status; the raw id is shown meanwhile")
        report = log.info if reason in _QUIET else log.warning
        report("slack.user.name_unavailable", reason=reason, user_id=user_id, error=detail, hint=hint,
               note="logged once per reason")  # fmt: skip

    def _store(self, user_id: str, name: str, ttl: float) -> None:
        self._names[user_id] = (name, self._clock() + ttl)
        self._names.move_to_end(user_id)
        while len(self._names) > self._max_users:
            self._names.popitem(last=False)

    async def close(self) -> None:
        """Cancel lookups still running (the adapter is stopping)."""
        lookups = list(self._lookups.values())
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)
