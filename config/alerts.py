"""The ``alerts:`` section: where operator alerts go and when a condition is worth one."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator
from pydantic_core import PydanticCustomError

from config.fields import PositiveInt, Section, between

class AlertWebhook(Section):
    url: str
    """Where each alert is POSTed as JSON (a secret: it often holds a token, e.g. a Slack incoming webhook);
    write ``${VAR}`` to take it from the environment or the home's .env."""
    headers: dict[str, str] = {}
    """Extra request headers (``Authorization: "Bearer ${ALERT_TOKEN}"``); their values are treated as secrets."""
    timeout: Annotated[float, between(0.5, 120.0)] = 10.0
    """Seconds one POST may take."""


class AlertsConfig(Section):
    chats: list[str] = []
    """Chats alerts are sent to, as ``platform:chat_id`` (the platform one of ``platforms``' sections, checked
    with the whole configuration) (``telegram:123456789``, ``slack:C0123ABCD``,
    ``discord:<channel id>``); the platform must be connected."""
    webhooks: list[AlertWebhook] = []
    """URLs alerts are POSTed to (JSON), tried again with backoff until they answer 2xx."""
    degraded_after_minutes: Annotated[float, between(0.0, 1440.0)] = 5.0
    """An adapter degraded or failed for this long raises an alert (0: at the first check that finds it so)."""
    model_failures: PositiveInt = 3
    """This many turns failed by the model within ``model_failures_minutes`` raise an alert."""
    model_failures_minutes: Annotated[float, between(0.1, 1440.0)] = 10.0
    compaction_failures: PositiveInt = 3
    """Compaction failing this many times in a row for one session raises an alert."""
    disk_free_percent: Annotated[float, between(0.0, 100.0)] = 5.0
    """Free space on the home's file system below this share raises an alert (0: never)."""
    check_every: Annotated[float, between(0.1, 3600.0)] = 15.0
    """Seconds between two looks at the conditions: a spell shorter than this may pass unalerted."""
    max_per_hour: Annotated[int, between(1, 10_000)] = 20
    """At most this many alerts an hour are sent to each destination; the rest are counted and summed up in
    the next one that goes out."""

    @field_validator("chats")
    @classmethod
    def _platform_and_chat(cls, value: list[str]) -> list[str]:
        for target in value:
            platform, _, chat = target.partition(":")
            if not platform.strip() or not chat.strip():
                raise PydanticCustomError(
                    "alert_platform", "\"{target}\" is not a chat to alert: write platform:chat_id, the platform as "
                    "named under platforms:", {"target": target},
                )  # fmt: skip
        return value
