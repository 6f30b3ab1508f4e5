"""Logging an inbound event an adapter could not read: its ids and why, never its content."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def rejection_reason(error: BaseException, *, limit: int = 300) -> str:
    """Why an inbound event could not be read or stored, for a ``*.rejected`` log line: never its content.

    A validation error from pydantic (as aiogram raises) is reduced to where and
    what (its own text quotes the offending input, which may be the user's
    words); any other error is its type and message, cut to ``limit`` characters.
    """
    if isinstance(error, ValidationError):
        found = error.errors(include_input=False, include_url=False)
        return "; ".join(f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in found)[:limit]
    return f"{type(error).__name__}: {error}"[:limit]


def log_rejected(logger: Any, event: str, error: BaseException, **ids: object) -> None:
    """Log one skipped inbound event as ``event`` (``telegram.update.rejected`` ...): its ids and the reason.

    Bad data (a missing key, a wrong type or value) needs no traceback; anything
    else may be a bug in the adapter and gets one, which shows code, not the event.
    """
    if not isinstance(error, ValueError | TypeError | LookupError):
        ids["exc_info"] = error
    logger.warning(event, reason=rejection_reason(error), hint="skipped; the events after it are handled as usual",
                   **ids)  # fmt: skip
