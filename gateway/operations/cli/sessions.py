"""``switchboard sessions``: look at stored conversations from the shell.

    switchboard sessions list [--platform P] [--limit N] [--json]
    switchboard sessions show ID [--json]          metadata and every message
    switchboard sessions search QUERY [--platform P] [--limit N] [--json]
    switchboard sessions lineage ID [--json]       the compression chain, root first
    switchboard sessions export ID                 JSON lines, one message per line

Human output is a table; ``--json`` prints one JSON document for scripts.
Reading is safe while the gateway runs (the database is in WAL mode). A
missing database reads as empty, with a note on stderr naming the path it
looked for (stdout stays clean for ``--json``). ``--platform`` ignores case;
``--limit`` takes 1 to 100000 (search: 500); a search query needs at least one word.
Piping into a reader that stops early (``| head``) ends the command quietly
(see ``gateway.operations.cli.main``). Exit status: 0, 1 when the session is not found
or the database cannot be read (the message names the file and what to do),
2 for usage and configuration errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Any

from config.loader import LoadedConfig
from gateway.operations.cli.common import add_config_option, load_config_or_exit, log_warnings_to_stderr
from gateway.store_setup import database_name, open_configured_store
from storage import (
    MAX_SEARCH_HITS,
    MessageRecord,
    Fault,
    SchemaError,
    SchemaTooNewError,
    SearchHit,
    SessionRecord,
    StorageEngine,
    StorageError,
    fault_of,
    is_busy,
)

EXIT_OK = 0
EXIT_NOT_FOUND = 1
MAX_LIMIT = 100_000  # --limit: far more than a terminal can show, and small enough for SQLite's integers
_CELL = 48  # widest table cell before it is cut


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sessions",
        help="list, show, search and export stored conversations",
        description="Look at the conversations stored in the database.",
    )
    commands = parser.add_subparsers(dest="sessions_command", metavar="COMMAND", required=True)

    listing = _command(commands, "list", "the newest sessions first", list_command)
    listing.add_argument("--platform", type=_platform, help="only this platform (telegram, discord, slack)")
    listing.add_argument("--limit", type=_limit, default=50, help=f"at most this many (default 50, at most {MAX_LIMIT})")

    show = _command(commands, "show", "a session's details and messages", show_command)
    show.add_argument("session_id", metavar="ID")

    search = _command(commands, "search", "full-text search over every message", search_command)
    search.add_argument("query", nargs="+", action=_Query, metavar="QUERY", help='words, "a phrase", prefix*, OR, NOT')
    search.add_argument("--platform", type=_platform, help="only this platform")
    search.add_argument("--limit", type=partial(_limit, most=MAX_SEARCH_HITS), default=20,
                        help=f"at most this many hits (default 20, at most {MAX_SEARCH_HITS})")

    lineage = _command(commands, "lineage", "the chain a session belongs to, root first", lineage_command)
    lineage.add_argument("session_id", metavar="ID")

    export = _command(commands, "export", "a session's messages as JSON lines", export_command, json_flag=False)
    export.add_argument("session_id", metavar="ID")


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    json_flag: bool = True,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
    add_config_option(parser)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(handler=handler)
    return parser


# -- commands ------------------------------------------------------------------------------------


def list_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine | None) -> int:
        found = await store.list_sessions(platform=args.platform, limit=args.limit) if store else []
        if args.json:
            _print_json([s.to_json_dict(include_prompt=False) for s in found])
        elif not found:
            print("No sessions.")
        else:
            print(_table(["ID", "PLATFORM", "STARTED", "MSGS", "STATE", "TITLE"], [_session_row(s) for s in found]))
        return EXIT_OK

    return _run(args, run)


def show_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine | None) -> int:
        session = await store.get_session(args.session_id) if store else None
        if session is None:
            return _not_found(args.session_id)
        history = await store.load_messages(session.id) if store else []
        if args.json:
            _print_json({"session": session.to_json_dict(), "messages": [m.to_json_dict() for m in history]})
        else:
            print(_render_session(session, history))
        return EXIT_OK

    return _run(args, run)


def search_command(args: argparse.Namespace) -> int:
    query: str = args.query  # the words joined by _Query

    async def run(store: StorageEngine | None) -> int:
        hits = await store.search(query, limit=args.limit, platform=args.platform) if store else []
        if args.json:
            _print_json([hit.to_json_dict() for hit in hits])
        elif not hits:
            print(f"No messages match {query!r}.")
        else:
            print(_table(["SESSION", "SEQ", "ROLE", "PLATFORM", "WHEN", "MATCH"], [_hit_row(h) for h in hits],
                         last_width=100))  # fmt: skip
        return EXIT_OK

    return _run(args, run)


def lineage_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine | None) -> int:
        session = await store.get_session(args.session_id) if store else None
        if store is None or session is None:
            return _not_found(args.session_id)
        chain = await store.lineage(session.id)
        if args.json:
            _print_json([s.to_json_dict(include_prompt=False) for s in chain])
        else:
            rows = [["*" if s.id == session.id else "", *_session_row(s)] for s in chain]
            print(_table(["", "ID", "PLATFORM", "STARTED", "MSGS", "STATE", "TITLE"], rows))
        return EXIT_OK

    return _run(args, run)


def export_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine | None) -> int:
        session = await store.get_session(args.session_id) if store else None
        if store is None or session is None:
            return _not_found(args.session_id)
        for message in await store.load_messages(session.id):
            print(json.dumps(message.to_json_dict(), ensure_ascii=False))
        return EXIT_OK

    return _run(args, run)


# -- plumbing ------------------------------------------------------------------------------------


def _limit(text: str, most: int = MAX_LIMIT) -> int:
    """``--limit``: a whole number from 1 to ``most`` (argparse reports anything else as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        shown = text if len(text) <= 30 else text[:30] + "…"
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {most}, got {shown!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > most:
        raise argparse.ArgumentTypeError(f"must be at most {most}, got {value}")
    return value


def _platform(text: str) -> str:
    """``--platform``: platform names are stored in lower case, so ``Telegram`` means ``telegram``."""
    return text.strip().lower()


class _Query(argparse.Action):
    """The search words joined into one query; a query with no words at all is a usage error."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        query = " ".join(values)
        if not query.strip():
            raise argparse.ArgumentError(self, "a search query needs at least one word")
        setattr(namespace, self.dest, query)


def _run(args: argparse.Namespace, command: Callable[[StorageEngine | None], Awaitable[int]]) -> int:
    loaded = load_config_or_exit(args)
    log_warnings_to_stderr()

    async def main() -> int:
        async with _opened(loaded) as store:
            return await command(store)

    try:
        return asyncio.run(main())
    except StorageError as error:
        print(f"switchboard sessions: {_cannot_read(database_name(loaded), error)}", file=sys.stderr)
        return EXIT_NOT_FOUND


def _cannot_read(path: Any, error: StorageError) -> str:
    """What went wrong with the database at ``path``, and what to do about it, in one message."""
    if isinstance(error, SchemaTooNewError):
        return str(error)  # names the file and says what to do already
    cause = getattr(error, "cause", None)  # WriteFailedError and ReadFailedError carry the sqlite3 error
    reason = str(cause if isinstance(cause, sqlite3.Error) else error).rstrip(".")
    code = getattr(cause, "sqlite_errorcode", None)
    if fault_of(error) is Fault.UNREACHABLE:
        advice = "The database server does not answer: check that it runs (`switchboard doctor` says more)."
    elif cause is not None and is_busy(cause):
        advice = "Another process is holding it locked; try again in a moment."
    elif (code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)) or isinstance(
        error, SchemaError
    ):
        advice = "Check storage.path in the config, or restore a backup (see switchboard restore --help)."
    else:
        advice = "Check storage.path in the config, and that the file is a readable Switchboard database."
    return f"cannot read the database {path}: {reason}. {advice}"


@asynccontextmanager
async def _opened(loaded: LoadedConfig) -> AsyncIterator[StorageEngine | None]:
    """The store, or None when there is no SQLite file yet (nothing stored: read as empty, with a note)."""
    path = loaded.db_path
    if loaded.engine == "sqlite" and not path.exists():
        print(
            f"switchboard sessions: no database at {path} yet (nothing has been stored); "
            "check storage.url (or storage.path) in the config if you expected one.",
            file=sys.stderr,
        )
        yield None
        return
    store = await open_configured_store(loaded)
    try:
        yield store
    finally:
        await store.close()


def _not_found(session_id: str) -> int:
    print(f"switchboard sessions: no session with id {session_id!r}", file=sys.stderr)
    return EXIT_NOT_FOUND


def _print_json(document: Any) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2))


# -- rendering -----------------------------------------------------------------------------------


def _when(timestamp: float | None) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M") if timestamp is not None else "-"


def _state(session: SessionRecord) -> str:
    return "open" if session.is_open else f"ended: {session.end_reason}"


def _one_line(text: str | None, width: int = _CELL) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _session_row(session: SessionRecord) -> list[str]:
    return [session.id, session.platform, _when(session.started_at), str(session.message_count),
            _state(session), session.title or ""]  # fmt: skip


def _hit_row(hit: SearchHit) -> list[str]:
    return [hit.session_id, str(hit.seq), hit.role, hit.platform, _when(hit.created_at), hit.snippet]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, last_width: int = _CELL) -> str:
    limits = [_CELL] * (len(headers) - 1) + [last_width]
    cells = [[_one_line(cell, limit) for cell, limit in zip(row, limits)] for row in rows]
    widths = [max(len(str(line[i])) for line in [list(headers), *cells]) for i in range(len(headers))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(line, widths)).rstrip()
             for line in [list(headers), *cells]]  # fmt: skip
    return "\n".join(lines)


def _render_session(session: SessionRecord, history: Sequence[MessageRecord]) -> str:
    title = f"  {session.title!r}" if session.title else ""
    usage = (
        f"in {session.input_tokens:,}  out {session.output_tokens:,}  cache read {session.cache_read_tokens:,}  "
        f"cache write {session.cache_write_tokens:,}  last prompt {session.last_prompt_tokens:,}  "
        f"cost ${session.cost_usd:.4f}"
    )
    fields = [
        ("key", session.session_key),
        ("chat", f"{session.platform} {session.chat_id}" + (f" ({session.chat_type})" if session.chat_type else "")
         + (f", thread {session.thread_id}" if session.thread_id else "")),
        ("user", session.user_id or "-"),
        ("model", session.model or "-"),
        ("started", _when(session.started_at)),
        ("state", _state(session) + (f" at {_when(session.ended_at)}" if session.ended_at else "")),
        ("parent", session.parent_session_id or "-"),
        ("tokens", usage),
        ("prompt", f"{len(session.system_prompt):,} characters (--json shows it)" if session.system_prompt else "-"),
    ]  # fmt: skip
    lines = [f"Session {session.id}{title}"]
    lines += [f"  {label.ljust(8)} {value}" for label, value in fields]
    lines += ["", f"Messages ({len(history)})"]
    for message in history:
        lines.append(f"  #{message.seq} {message.role}  {_when(message.created_at)}")
        body = [*message.content.splitlines()]
        body += [f"→ {call.name} {call.arguments}" for call in message.tool_calls]
        if message.tool_call_id:
            body.append(f"(answers {message.tool_call_id}{', ' + message.tool_name if message.tool_name else ''})")
        lines += [f"      {line}" for line in body] or ["      (empty)"]
    return "\n".join(lines)
