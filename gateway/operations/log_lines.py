"""One line of gateway.log: its fields in a fixed order, rendered as greppable text or as JSON.

A text line is ``<ts> <level> <event> <context> <fields>``: the context (platform, chat,
session, turn) comes first so lines of one turn line up; values with spaces, quotes or
newlines are JSON-quoted, so a record never spans lines; floats are written in fixed point.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
from decimal import Decimal
from typing import Any

import structlog
from structlog.typing import EventDict, WrappedLogger

_LEVEL_LABELS = {"debug": "debug", "info": "info", "warning": "warn", "error": "error", "critical": "crit"}
_RESERVED = ("ts", "level", "event")
_CONTEXT_ORDER = ("platform", "chat", "session", "turn")
def add_timestamp(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    event_dict["ts"] = utc_stamp(record.created if record is not None else time.time())
    return event_dict


_last_second: list[tuple[int, str]] = [(-1, "")]
"""The last whole second formatted and its text, as one tuple (threads log too: read and replaced whole)."""


def utc_stamp(created: float) -> str:
    """``2026-11-22T10:00:00.123Z``: as ``datetime``'s ISO format to the millisecond, with the text of the
    current second formatted once per second rather than once per line."""
    fraction, whole = math.modf(created)
    micros = round(fraction * 1_000_000)  # rounded as datetime.fromtimestamp rounds
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1, micros + 1_000_000
    second = int(whole)
    cached = _last_second[0]
    if cached[0] != second:
        cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        _last_second[0] = cached
    return f"{cached[1]}.{micros // 1000:03d}Z"


_CONTEXT_RANK = {key: rank for rank, key in enumerate(_CONTEXT_ORDER)}


def _context_rank(key: str) -> int:
    return _CONTEXT_RANK.get(key, 99)


def context_first(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Bound context (turn, platform, chat, session) leads, then the event's own fields."""
    context = structlog.contextvars.get_contextvars()
    if not context:
        return event_dict
    ordered = sorted(context, key=_context_rank)
    merged: dict[str, Any] = {key: context[key] for key in ordered if key not in event_dict}
    merged.update(event_dict)
    return merged


def foreign_fields(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """A stdlib record from a library: keep its logger name so the line says where it came from."""
    record = event_dict.get("_record")
    if record is not None and not record.name.startswith(("gateway", "agent", "storage", "adapters", "switchboard")):
        event_dict.setdefault("logger", record.name)
    return event_dict


def exception_field(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    exc_info = event_dict.pop("exc_info", None)
    if exc_info:
        if exc_info is True:
            exc_info = sys.exc_info()
        if isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        if exc_info and exc_info[0] is not None:
            event_dict["exc"] = "".join(logging.Formatter().formatException(exc_info)).strip()
    return event_dict


_NEEDS_QUOTES = re.compile(r'[ "=\\]')
"""With ``str.isprintable()`` (false for newlines, tabs and other control or separator characters):
the characters that make a value ambiguous unquoted."""


def _quote(value: Any) -> str:
    if type(value) is int:  # the commonest value: no checks needed
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _fixed_point(value)
    text = value if isinstance(value, str) else str(value)
    if not text or _NEEDS_QUOTES.search(text) or not text.isprintable():
        return json.dumps(text, ensure_ascii=False)
    return text


def _fixed_point(value: float) -> str:
    """Six significant digits, never an exponent: ``7.5e-05`` is written ``0.000075`` (``grep -o 'cost=[0-9.]*'``
    would take ``7.5`` of it), ``1234567.8`` is written ``1234570``."""
    text = f"{value:.6g}"
    if "e" not in text or not math.isfinite(value):
        return text
    return format(Decimal(text), "f")


def render_text(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    """``<ts> <level> <event> key=value ...`` on one line."""
    level = _LEVEL_LABELS.get(str(event_dict.pop("level", "info")), "info")
    ts = event_dict.pop("ts", "")
    event = str(event_dict.pop("event", "")).replace("\n", "\\n")
    fields = " ".join(f"{key}={_quote(value)}" for key, value in event_dict.items() if value is not None)
    line = f"{ts} {level:<5} {event}"
    return f"{line} {fields}" if fields else line


def render_json(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    ordered = {key: event_dict.pop(key) for key in _RESERVED if key in event_dict}
    ordered.update(event_dict)
    return json.dumps(ordered, ensure_ascii=False, default=str)
