"""What an alert says: what happened and what to do, in a few sentences.

Only ids, counts, states and our own reasons go in: never a message's text, a user's name or a
secret (every text is masked once more on its way out, like everything the gateway sends).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

NAMES = {"telegram": "Telegram", "discord": "Discord", "slack": "Slack"}
CONDITION_NAMES = {
    "adapter_down": "platform down",
    "replies_given_up": "replies given up",
    "model_failures": "model failing",
    "database": "database failing",
    "disk_low": "disk nearly full",
    "compaction_failing": "compaction failing",
    "held_back": "alerts held back",
}


def platform_name(platform: str) -> str:
    return NAMES.get(platform, platform)


def minutes(seconds: float) -> str:
    whole = max(0, round(seconds / 60))
    if whole < 1:
        return "less than a minute"
    if whole < 120:
        return f"{whole} min"
    return f"{whole / 60:.1f} h"


def clock_time(wall: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(wall))


def adapter_down(platform: str, state: str, detail: str, for_seconds: float) -> str:
    why = f" ({detail})" if detail else ""
    return (f"{platform_name(platform)} has been {state} for {minutes(for_seconds)}{why}: messages sent to the bot "
            f"there may not be received or answered. The gateway keeps reconnecting by itself. What to do: see "
            f"/health and the `adapter.` lines of gateway.log, the platform's status page, and whether the bot's "
            f"token is still valid (`switchboard doctor`).")  # fmt: skip


def adapter_back(platform: str) -> str:
    return f"{platform_name(platform)} is running again. Nothing to do."


def replies_given_up(platform: str, count: int) -> str:
    replies = "reply message was" if count == 1 else "reply messages were"
    return (f"{count} {replies} given up on {platform_name(platform)}: they could not be delivered. What to do: "
            f"the `delivery.failed` lines of gateway.log say why for each (the bot blocked or removed from a chat, "
            f"the platform refusing the message, or an outage longer than gateway.undelivered_keep_hours).")  # fmt: skip


def replies_back(platform: str) -> str:
    return f"Replies on {platform_name(platform)} are delivered again. Nothing to do."


def model_failures(count: int, window_minutes: float) -> str:
    return (f"{count} turns failed in the last {window_minutes:g} min because the model could not be reached; those "
            f"users were told to try again later. What to do: check the provider's status page, the API key and its "
            f"quota (`switchboard doctor` tries the model), and the `turn.failed` lines of gateway.log.")  # fmt: skip


def model_back() -> str:
    return "The model answers again: a turn was answered after the failures. Nothing to do."


def database(reason: str, hint: str, waiting: int) -> str:
    turns = f" {waiting} turn{'s' if waiting != 1 else ''} wait for it;" if waiting else ""
    return (f"The database is failing: {reason}.{turns} messages are kept and answered once it works again. "
            f"What to do: {hint}.")


def database_back() -> str:
    return "The database works again; the turns that waited are being answered. Nothing to do."


def disk_low(path: str, free_ratio: float, free_bytes: int, threshold_percent: float) -> str:
    return (f"Only {free_ratio:.1%} of the disk holding {path} is free ({free_bytes / 2**30:.1f} GB; the alert is set "
            f"at {threshold_percent:g}%). When it is full the database cannot store messages and the bot stops "
            f"answering. What to do: free space there (old backups, logs of other programs), or grow the disk.")  # fmt: skip


def disk_back(path: str, free_ratio: float) -> str:
    return f"The disk holding {path} has room again ({free_ratio:.1%} free). Nothing to do."


def compaction_failing(session_key: str, count: int) -> str:
    return (f"Compacting the conversation `{session_key}` failed {count} times in a row: the summary model did not "
            f"answer, so the conversation keeps growing toward the model's context window. What to do: see the "
            f"`compaction.summary_failed` lines of gateway.log and the summary model's settings "
            f"(`auxiliary.compression`, else the main model).")  # fmt: skip


def compaction_back(session_key: str) -> str:
    return f"Compacting the conversation `{session_key}` works again. Nothing to do."


def held_back(counts: Mapping[str, int], max_per_hour: int) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{n} x {CONDITION_NAMES.get(condition, condition)}" for condition, n in sorted(counts.items()))
    return (f"{total} more alert{'s were' if total != 1 else ' was'} held back in the last hour "
            f"(alerts.max_per_hour is {max_per_hour}): {parts}. /health and gateway.log show the current state.")


def headline(fired: bool, host: str) -> str:
    return f"Switchboard alert ({host})" if fired else f"Switchboard recovered ({host})"
