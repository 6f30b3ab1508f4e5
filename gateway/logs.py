"""gateway.log: one greppable line per event, secrets masked, rotated by size.

Text lines look like::

    2026-11-22T10:00:00.123Z info  turn.done platform=telegram session=01J... turn=7f3a in=1234 out=56

Values with spaces, quotes or newlines are JSON-quoted, so a record never spans
lines (tracebacks go into one ``exc`` field). ``logging.format: json`` writes
one JSON object per line instead. Every line inside a turn carries the same
``turn`` id plus platform / chat / session, through context binding
(:func:`bind`). Library loggers (aiogram, discord.py, aiohttp, ...) go through
the same formatter, so their lines look alike and are redacted too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import logging.handlers
import math
import re
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import EventDict, WrappedLogger

from gateway.redaction import redactor

_LEVEL_LABELS = {"debug": "debug", "info": "info", "warning": "warn", "error": "error", "critical": "crit"}
_RESERVED = ("ts", "level", "event")
_CONTEXT_ORDER = ("platform", "chat", "session", "turn")
# Libraries that are chatty at INFO about things operators do not need.
_QUIET_LIBRARIES = ("aiohttp.access", "httpx", "httpx2", "httpcore", "httpcore2", "asyncio")


def _timestamp(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    event_dict["ts"] = utc_stamp(record.created if record is not None else time.time())
    return event_dict


_last_second: list[tuple[int, str]] = [(-1, "")]
"""The last whole second formatted and its text, as one tuple (threads log too: read and replaced whole)."""


def utc_stamp(created: float) -> str:
    """``2026-11-22T10:00:00.123Z``: as ``datetime``'s ISO format to the millisecond, with the text of the
    current second formatted once (a line's timestamp was a few per cent of the cost of writing it)."""
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


def _context_first(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Bound context (turn, platform, chat, session) leads, then the event's own fields."""
    context = structlog.contextvars.get_contextvars()
    if not context:
        return event_dict
    ordered = sorted(context, key=_context_rank)
    merged: dict[str, Any] = {key: context[key] for key in ordered if key not in event_dict}
    merged.update(event_dict)
    return merged


def _foreign_fields(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """A stdlib record from a library: keep its logger name so the line says where it came from."""
    record = event_dict.get("_record")
    if record is not None and not record.name.startswith(("gateway", "agent", "storage", "adapters", "switchboard")):
        event_dict.setdefault("logger", record.name)
    return event_dict


def _exception_field(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
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
        return f"{value:.6g}"
    text = value if isinstance(value, str) else str(value)
    if not text or _NEEDS_QUOTES.search(text) or not text.isprintable():
        return json.dumps(text, ensure_ascii=False)
    return text


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


class _RotatingFile(logging.handlers.RotatingFileHandler):
    """Size rotation that formats each record once (the stdlib formats it again to measure it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            if self.stream is None:
                self.stream = self._open()
            position = self.stream.tell()
            if self.maxBytes > 0 and position > 0 and position + len(line) > self.maxBytes:
                self.doRollover()
            self.stream.write(line)
            self.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging must never take the process down
            self.handleError(record)


class RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """The last word on every line: masks secrets in the rendered text.

    A line of our own (structlog's event dict, passed on by ``wrap_for_formatter``) is rendered
    from a copy of that dict straight away; the base class also copies the whole record and runs
    the stdlib formatting on it, which our lines never use (a sixth of the cost of a line).
    Library records take the base class's way.
    """

    def format(self, record: logging.LogRecord) -> str:
        event = record.msg
        method = getattr(record, "_name", None)
        if type(event) is dict and method is not None and getattr(record, "_logger", None) is not None:
            rendered: Any = {**event, "_record": record, "_from_structlog": True}
            for processor in self.processors:
                rendered = processor(self.logger, method, rendered)
            return redactor(rendered)
        return redactor(super().format(record))


def _formatter(fmt: str) -> RedactingFormatter:
    renderer = render_json if fmt == "json" else render_text
    shared: list[Any] = [structlog.stdlib.add_log_level, _timestamp, _foreign_fields]
    return RedactingFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _context_first,
            _exception_field,
            renderer,
        ],
    )


class _BoundLogger(structlog.stdlib.BoundLogger):
    """Debug and info lines below the configured level are dropped before any processor runs.

    (structlog drops them in its first processor, ``filter_by_level``, by raising an exception: a
    few microseconds for a line nobody sees, several times per turn.) Only while that processor
    leads the chain: ``structlog.testing.capture_logs`` replaces the chain and sees every line.
    """

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._processors and self._processors[0] is structlog.stdlib.filter_by_level:
            if not self._logger.isEnabledFor(logging.DEBUG):
                return None
        return super().debug(event, *args, **kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._processors and self._processors[0] is structlog.stdlib.filter_by_level:
            if not self._logger.isEnabledFor(logging.INFO):
                return None
        return super().info(event, *args, **kw)


def configure_logging(
    *,
    level: str = "info",
    fmt: str = "text",
    file: Path | None = None,
    max_bytes: int = 10 * 1024 * 1024,
    backups: int = 5,
    console: bool = True,
    secrets: list[str] | None = None,
) -> None:
    """Route structlog and stdlib logging through one redacting formatter to file and/or stderr."""
    redactor.add_secrets(secrets or [])
    handlers: list[logging.Handler] = []
    if file is not None:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        file.touch(mode=0o600, exist_ok=True)
        handlers.append(_RotatingFile(file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"))
    if console:
        handlers.append(logging.StreamHandler(sys.stderr))
    formatter = _formatter(fmt)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level.upper())
    # Our lines show none of the caller's file, line, function, thread or process: spare every record
    # the stack walk and the lookups (the logging module's documented switches for this).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # Module loggers (``structlog.get_logger(...)`` at import) are lazy proxies that would assemble a
    # new bound logger on every call (measured: a tenth of the event loop's time per turn in the
    # gateway benchmark, even for lines below the level); cached on first use they do it once. A
    # cached logger keeps the processor list it was built with, so that list is changed in place,
    # never replaced (structlog's own ``capture_logs`` does the same for the same reason).
    processors = structlog.get_config()["processors"]
    processors[:] = [
        structlog.stdlib.filter_by_level,
        structlog.stdlib.add_log_level,
        _timestamp,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ]
    structlog.configure(
        processors=processors,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=_BoundLogger,
        cache_logger_on_first_use=True,
    )


def shutdown_logging() -> None:
    """Flush and close every handler (the last thing the process does)."""
    logging.shutdown()


_TURN_ID_NAMESPACE = uuid.NAMESPACE_URL.bytes


def turn_id_for(platform: str, event_id: str) -> str:
    """A turn's id: ``PLATFORM:EVENT_ID`` of the message that starts it (its outbox rows keep it)."""
    return f"{platform}:{event_id}"


def short_turn_id(turn_id: str) -> str:
    """The 8 hex characters gateway.log shows as ``turn=``: those of ``uuid5(NAMESPACE_URL, turn_id)``
    (its first bytes are the SHA-1's), without building the UUID.

    A turn's id is :func:`turn_id_for` the message that started it, so the line that accepted
    that message carries the same ``turn=``; a chunk's outbox row keeps the turn's full id, so
    chunks sent again after a restart are logged under it too."""
    return hashlib.sha1(_TURN_ID_NAMESPACE + turn_id.encode(), usedforsecurity=False).hexdigest()[:8]


def bind(**fields: Any) -> AbstractContextManager[None]:
    """Attach fields (turn, platform, chat, session) to every line logged inside the block,
    including lines from tasks started inside it."""
    return _Bound(fields)


class _Bound(AbstractContextManager[None]):
    """structlog's ``bound_contextvars`` without its generator: a turn enters one of these, and the
    generator-based version cost more than twice as much (9 us against 4 us)."""

    __slots__ = ("_fields", "_tokens")

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._tokens: Mapping[str, Any] = {}

    def __enter__(self) -> None:
        self._tokens = structlog.contextvars.bind_contextvars(**self._fields)

    def __exit__(self, *exc: object) -> None:
        structlog.contextvars.reset_contextvars(**self._tokens)


