"""The ``liveness:`` and ``catch_up:`` sections: noticing a connection that hears nothing, and fetching what it missed."""

from __future__ import annotations

from typing import Annotated, Literal

from config.fields import Section, between


class LivenessConfig(Section):
    enabled: bool = True
    """Probe a platform connection that has been quiet for ``idle_probe_after`` seconds while it claims to be up."""
    idle_probe_after: Annotated[float, between(1.0, 86_400.0)] = 600.0
    """Seconds without any inbound event after which the connection is probed (and again every as many
    seconds while it stays quiet)."""
    check_every: Annotated[float, between(0.1, 3600.0)] = 15.0
    """Seconds between the gateway's looks at how long each connection has been quiet."""
    probe_timeout: Annotated[float, between(0.5, 300.0)] = 15.0
    """Seconds a probe may take; one that takes longer failed."""


class CatchUpConfig(Section):
    enabled: bool = True
    """After a reconnect that may have lost events (Discord, Slack), fetch the chats' recent history and answer
    what never arrived. Telegram needs none: it keeps undelivered updates itself."""
    max_age_hours: Annotated[float, between(0.01, 168.0)] = 24.0
    """How far back a catch-up reads, in hours (never before the last message stored from the chat)."""
    per_chat: Annotated[int, between(1, 1000)] = 50
    """The most messages fetched from one chat or thread (the newest ones)."""
    total: Annotated[int, between(1, 100_000)] = 500
    """The most messages one catch-up fetches in all."""
    answer_within_minutes: Annotated[float, between(0.0, 10_080.0)] = 30.0
    """A caught-up message sent longer ago than this is not answered by the model: it is stored, and its chat
    gets one short note (``old_messages: note``) or nothing (``skip``)."""
    old_messages: Literal["note", "skip"] = "note"
    """What the chat of messages too old to answer gets: one note saying they were missed, or nothing."""
