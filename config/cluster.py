"""The ``cluster:`` section: several gateway processes (replicas) sharing one PostgreSQL database.

Off by default: one gateway per database, and a second one is refused. On, every replica with the same
database and bots shares the work: each platform connection that only one process may hold (Telegram
long polling, the Discord gateway, Slack Socket Mode) is held by one replica through a lease, each
conversation is worked on by one replica at a time through a claim, and a replica that stops beating
for ``expire_after`` seconds is replaced by the others (README "Running several gateways").
"""

from __future__ import annotations

from typing import Annotated

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from config.fields import Section, between


class ClusterConfig(Section):
    enabled: bool = False
    """Run as one of several replicas on one PostgreSQL database (needs ``storage.url: postgresql://...``)."""
    replica_id: str | None = None
    """This replica's name in /health, logs and ``switchboard cluster status``; unset: ``{host}-{pid}``."""
    heartbeat_every: Annotated[float, between(0.2, 60.0)] = 5.0
    """Seconds between a replica's heartbeats (which also renew its leases and claims)."""
    expire_after: Annotated[float, between(1.0, 600.0)] = 15.0
    """Seconds without a heartbeat after which a replica counts as dead and the others take its work over."""
    scan_every: Annotated[float, between(0.1, 60.0)] = 2.0
    """Seconds between looks for work nobody does (a dead replica's conversations, connections left free)."""

    @model_validator(mode="after")
    def _beats_fit_the_expiry(self) -> ClusterConfig:
        if self.expire_after < 2 * self.heartbeat_every:
            raise PydanticCustomError(
                "cluster_timing",
                "expire_after ({expire}) must be at least twice heartbeat_every ({beat}): one late heartbeat would "
                "otherwise let the other replicas take this one's work while it still does it",
                {"expire": self.expire_after, "beat": self.heartbeat_every},
            )
        return self
