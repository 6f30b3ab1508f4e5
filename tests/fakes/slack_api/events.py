"""Events API payloads as Slack sends them, for the fake and the signed-POST helper."""

from __future__ import annotations

import copy
import itertools
import time
from typing import Any

from .server import APP_ID, BOT_USER_ID, TEAM_ID

_ids = itertools.count(1)
_ts = itertools.count(1)


def next_ts() -> str:
    """A fresh message ts (seconds.micro, unique in this test run)."""
    return f"{int(time.time())}.{next(_ts):06d}"


def message_key(payload: dict[str, Any]) -> str:
    """The id the adapter gives the message in ``payload``: ``{channel}:{ts}``, the same for every copy of it."""
    event = payload["event"]
    return f"{event['channel']}:{event['ts']}"


def envelope(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    """An ``event_callback`` body around ``event``."""
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
    }


def mention(channel: str, user: str, text: str, *, ts: str | None = None, thread_ts: str | None = None,
            **extra: Any) -> dict[str, Any]:  # fmt: skip
    event = {"type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts or next_ts(),
             "team": TEAM_ID, "event_ts": ts}  # fmt: skip
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return envelope(event)


def message(channel: str, user: str | None, text: str, *, channel_type: str = "im", ts: str | None = None,
            thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    event: dict[str, Any] = {"type": "message", "channel": channel, "channel_type": channel_type, "text": text,
                             "ts": ts or next_ts(), "team": TEAM_ID}  # fmt: skip
    if user is not None:
        event["user"] = user
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return envelope(event)


def from_other_workspace(payload: dict[str, Any], team: str) -> dict[str, Any]:
    """``payload`` as Slack delivers it for the app's installation in another workspace, ``team``.

    An app distributed to several workspaces gets every installation's events on the same
    Request URL (or app-level socket): the envelope's ``team_id`` and its ``authorizations``
    name that other installation.
    """
    body = copy.deepcopy(payload)
    body["team_id"] = team
    body["authorizations"] = [{"enterprise_id": None, "team_id": team, "user_id": "U0THEIRBOT", "is_bot": True}]
    body["event"]["team"] = team
    return body


def in_shared_channel(payload: dict[str, Any], *, sender_team: str, host_team: str) -> dict[str, Any]:
    """``payload`` in a Slack Connect channel that ``host_team`` started, sent by a member of ``sender_team``.

    As Slack sends it: ``is_ext_shared_channel`` is set, the envelope's ``team_id`` is the
    workspace that started the channel, ``authorizations`` still names this installation, and
    the sender's workspace is in the event's ``user_team``, ``source_team``, ``team`` and
    ``user_profile.team``.
    """
    body = copy.deepcopy(payload)
    body["is_ext_shared_channel"] = True
    body["team_id"] = host_team
    event = body["event"]
    event.update(team=sender_team, user_team=sender_team, source_team=sender_team)
    event["user_profile"] = {"name": str(event.get("user") or "").lower(), "team": sender_team}
    return body
