"""gateway.log: one greppable line per event, secrets masked, rotated by size.

Text lines look like::

    2026-11-22T10:00:00.123Z info  turn.done platform=telegram session=01J... turn=7f3a in=1234 out=56

Values with spaces, quotes or newlines are JSON-quoted, so a record never spans
lines (tracebacks go into one ``exc`` field). ``logging.format: json`` writes
one JSON object per line instead. Every line inside a turn carries the same
``turn`` id plus platform / chat / session, through context binding
(:func:`bind`). Library loggers (aiogram, discord.py, aiohttp, ...) go through
the same formatter, so their lines look alike and are redacted too.

No message text is written: Switchboard's own lines carry ids, counts and
reasons, never what a user or the model said, and libraries (whose debug lines
hold what they send and receive: the model SDKs' request dumps, the database
driver's statements) stay at warning unless ``logging.libraries`` names them
(``config/models.py`` refuses most of them at debug without
``logging.include_content: true``). Floats are written in fixed point
(``cost=0.000075``), so ``grep -o 'cost=[0-9.]*'`` takes whole numbers.

A handler that cannot write (a full disk, a closed stderr) says so on stderr at
most once a minute, with how many lines were lost, instead of the standard
library's traceback for every line.
"""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import structlog

from gateway.operations.log_lines import add_timestamp, context_first, exception_field, foreign_fields, render_json, render_text
from gateway.operations.redaction import redactor

OWN_LOGGERS = ("gateway", "agent", "storage", "adapters", "config")
"""Switchboard's own loggers (by package), written at ``logging.level``; every other logger stays at warning."""
COMPLAIN_EVERY = 60.0
"""Seconds between two stderr lines about a log handler that cannot write."""


class _WriteFailures:
    """Handles a handler's failed writes: one stderr line a minute at most (the standard library prints a
    traceback for every record), saying what cannot be written, why, and how many lines were lost; and one
    line when writing works again. Mixed into the handlers below, before the standard library's class."""

    _target = "the log"
    _lost = 0
    _said_at: float | None = None
    _failed = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - the standard library's name
        self._failed = True
        self._lost += 1
        now = time.monotonic()
        if self._said_at is not None and now - self._said_at < COMPLAIN_EVERY:
            return
        error = sys.exc_info()[1]
        reason = (error.strerror if isinstance(error, OSError) and error.strerror else repr(error)) if error else "?"
        lost, first = self._lost, self._said_at is None
        self._said_at, self._lost = now, 0
        _say(f"switchboard: cannot write {self._target}: {reason}; {lost} log line{'s' if lost != 1 else ''} lost "
             f"{'so far' if first else 'since the last notice'} (said at most once a minute)")  # fmt: skip

    def _written(self) -> None:
        """After a record was written: if earlier ones were not, say that writing works again."""
        if self._said_at is not None and not self._failed:
            lost = self._lost
            self._said_at, self._lost = None, 0
            _say(f"switchboard: {self._target} is written again; {lost} more log line{'s' if lost != 1 else ''} "
                 "were lost before that")  # fmt: skip


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001, S110 - stderr is gone too: nowhere left to say it
        pass


class _RotatingFile(_WriteFailures, logging.handlers.RotatingFileHandler):
    """Size rotation that formats each record once (the stdlib formats it again to measure it)."""

    def __init__(self, filename: Path, **kwargs: Any) -> None:
        super().__init__(filename, **kwargs)
        self._target = str(filename)

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
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
            self._drop_stream()
            self.handleError(record)
        self._written()

    def _drop_stream(self) -> None:
        """Close the file after a failed write (its buffer would fail again on every later flush, and on
        close): the next record opens it anew, and is written once there is room again."""
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        try:
            if stream is not None:
                stream.close()
        except Exception:  # noqa: BLE001, S110 - the unwritten buffer fails once more; the descriptor is closed
            pass


class _Console(_WriteFailures, logging.StreamHandler):  # type: ignore[type-arg]
    """Lines to standard error (Docker and systemd read them there)."""

    _target = "standard error"

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)  # calls handleError when the write fails
        self._written()


class RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """The last word on every line: masks secrets in the rendered text.

    A line of our own (structlog's event dict, passed on by ``wrap_for_formatter``) is rendered
    from a copy of that dict straight away; the base class also copies the whole record and runs
    the stdlib formatting on it, work our lines would pay for and never use.
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
    shared: list[Any] = [structlog.stdlib.add_log_level, add_timestamp, foreign_fields]
    return RedactingFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            context_first,
            exception_field,
            renderer,
        ],
    )


class _BoundLogger(structlog.stdlib.BoundLogger):
    """Debug and info lines below the configured level are dropped before any processor runs.

    (structlog drops them in its first processor, ``filter_by_level``, by raising and catching an
    exception: work for a line nobody sees, several times per turn.) Only while that processor
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
    libraries: Mapping[str, str] | None = None,
) -> None:
    """Route structlog and stdlib logging through one redacting formatter to file and/or stderr.

    Switchboard's own loggers write from ``level`` up; every other logger (the libraries') from warning
    up (or from ``level`` when that is higher), except those ``libraries`` names with a level of their own.
    """
    redactor.add_secrets(secrets or [])
    handlers: list[logging.Handler] = []
    if file is not None:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        file.touch(mode=0o600, exist_ok=True)
        handlers.append(_RotatingFile(file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"))
    if console:
        handlers.append(_Console(sys.stderr))
    formatter = _formatter(fmt)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    _set_levels(logging.getLevelName(level.upper()), libraries or {})
    # Our lines show none of the caller's file, line, function, thread or process: spare every record
    # the stack walk and the lookups (the logging module's documented switches for this).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # Module loggers (``structlog.get_logger(...)`` at import) are lazy proxies that would assemble a
    # new bound logger on every call, even for lines below the level; cached on first use they do it
    # once. A cached logger keeps the processor list it was built with, so that list is changed in place,
    # never replaced (structlog's own ``capture_logs`` does the same for the same reason).
    processors = structlog.get_config()["processors"]
    processors[:] = [
        structlog.stdlib.filter_by_level,
        structlog.stdlib.add_log_level,
        add_timestamp,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ]
    structlog.configure(
        processors=processors,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=_BoundLogger,
        cache_logger_on_first_use=True,
    )


_levels_set: list[str] = []
"""The loggers the last configuration gave a level of their own (set back before the next one)."""


def _set_levels(level: int, libraries: Mapping[str, str]) -> None:
    for name in _levels_set:
        logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger().setLevel(max(logging.WARNING, level))
    own = {name: level for name in OWN_LOGGERS}
    named = {name: logging.getLevelName(value.upper()) for name, value in libraries.items()}
    for name, value in {**own, **named}.items():
        logging.getLogger(name).setLevel(value)
    _levels_set[:] = [*own, *named]


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
    """structlog's ``bound_contextvars`` as a plain class: every turn enters one, so it is spared the
    generator machinery of a ``contextmanager``."""

    __slots__ = ("_fields", "_tokens")

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._tokens: Mapping[str, Any] = {}

    def __enter__(self) -> None:
        self._tokens = structlog.contextvars.bind_contextvars(**self._fields)

    def __exit__(self, *exc: object) -> None:
        structlog.contextvars.reset_contextvars(**self._tokens)


