"""The storage package's logger. Events are named ``storage.<what>`` with key=value fields."""

from __future__ import annotations

import structlog

__all__ = ["log"]

log = structlog.get_logger("storage")
