"""``switchboard run``: from a loaded configuration to a running gateway and back to exit 0.

Exit statuses: 0 after a clean shutdown (SIGINT/SIGTERM), 2 when the
configuration cannot run (the message names what to set), a port is taken,
another gateway runs on the same home or database, or the database cannot be
used (damaged, from a newer version: the message says what to do), 1 when no
adapter could start.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog

from adapters.contract import AccessPolicy, Adapter, AdapterError
from adapters.http_listener import ListenError
from agent import MemoryScope
from config.loader import LoadedConfig
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.operations.database_health import cannot_open, database_problem
from gateway.operations.instance_lock import AlreadyRunning, CannotLock, InstanceLock
from gateway.turn.memory_scope import search_owner
from gateway.store_setup import database_name, open_configured_store
from storage import DatabaseInUseError, StorageEngine, StorageError

log = structlog.get_logger("gateway")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


def report_blockers(blockers: Sequence[str]) -> None:
    lines = ["Switchboard cannot start:", *(f"  - {line}" for line in blockers)]
    print("\n".join(lines), file=sys.stderr)
    for line in blockers:
        log.error("run.blocked", reason=line)


async def run_gateway(
    loaded: LoadedConfig,
    extra_adapters: Sequence[Adapter] = (),
    extra_access: Mapping[str, AccessPolicy] | None = None,
) -> int:
    """Run until SIGINT/SIGTERM; returns the process exit status.

    ``extra_adapters`` (with their ``extra_access`` policies) run beside the configured
    platforms; tests use them to drive the real process without a platform.
    """
    try:
        with InstanceLock.for_run(loaded.home, loaded.db_path if loaded.engine == "sqlite" else None):
            return await _serve(loaded, extra_adapters, extra_access)
    except START_REFUSALS as error:
        return refuse_start(error)


START_REFUSALS: tuple[type[Exception], ...] = (AlreadyRunning, CannotLock, ListenError)
"""What stops a start for good until the operator acts (another gateway holds the home, a lock file cannot
be made, a port is taken): exit status 2, which the systemd unit does not restart on, and one line saying
what to do."""


def refuse_start(error: Exception) -> int:
    """The start cannot go on: the reason on stderr and in the log, exit status 2 (no traceback)."""
    report_blockers([str(error)])
    return EXIT_CONFIG


async def _serve(
    loaded: LoadedConfig, extra_adapters: Sequence[Adapter], extra_access: Mapping[str, AccessPolicy] | None
) -> int:
    plan = build_plan(loaded, extra_platforms=[adapter.platform for adapter in extra_adapters])
    if not plan.ready:
        report_blockers(plan.blockers)
        return EXIT_CONFIG
    try:
        adapters = load_adapters(plan.enabled, loaded) + list(extra_adapters)
    except AdapterError as error:
        report_blockers([str(error)])
        return EXIT_CONFIG

    if loaded.engine == "sqlite":
        problem = await asyncio.to_thread(database_problem, loaded.db_path)  # a damaged file: say what to do
        if problem is not None:
            report_blockers([problem])
            return EXIT_CONFIG
    try:
        # In cluster mode the replicas hold the gateway lock shared, and keep out a gateway that wants it alone.
        store = await open_configured_store(loaded, wait_for_server=True, exclusive=True)
    except DatabaseInUseError as error:  # another gateway on this PostgreSQL database, as AlreadyRunning on SQLite
        return refuse_start(error)
    except (StorageError, sqlite3.Error) as error:
        report_blockers([cannot_open(database_name(loaded), error)])
        return EXIT_CONFIG
    agent = build_agent(loaded, search=search_function(store))
    gateway = Gateway(loaded, store, adapters, agent, extra_access=extra_access)
    stop = asyncio.Event()
    _install_signal_handlers(stop)
    try:
        if await gateway.start() == 0:
            log.error("run.no_adapter_running", hint="see the adapter.start_failed lines above")
            print("Switchboard stopped: no platform adapter could start (details in the log).", file=sys.stderr)
            return EXIT_FAILED
        settle_runtime()
        await stop.wait()
    finally:
        await gateway.shutdown()
    return EXIT_OK


GC_THRESHOLDS = (50_000, 4, 10)
"""Collect the young generation after 50,000 net new container objects instead of 700, the middle
generation after every 4th young collection. A turn allocates a few hundred such objects
(messages, records, futures, tasks), most freed again within the turn: at the default the
collector runs every few turns and walks objects that are about to go anyway. Higher thresholds
still would make the rare full collection pause longer for little gain."""


SWITCH_INTERVAL = 0.002
"""Seconds a thread that wants the GIL waits before the one running Python must hand it over (default 5 ms).

The storage writer's thread needs the GIL back after every SQLite statement, and under load the
event loop is always running Python: each statement of a write transaction then waits up to the
full interval, so a transaction takes tens of ms, and the turns awaiting it wait as long. A shorter
interval hands the GIL back sooner; a much shorter one only adds switches."""


def settle_runtime() -> None:
    """Set the interpreter up for a long-running gateway once it is up: the heap, then the GIL's switch interval."""
    settle_heap()
    sys.setswitchinterval(SWITCH_INTERVAL)


def settle_heap() -> None:
    """Set the garbage collector up for a long-running gateway, once it is up.

    What start-up allocated (modules, configuration, clients) lives as long as the process:
    collected once and frozen (``gc.freeze``), so later full collections skip it and pause for
    less. Then the thresholds above, so that collections no longer run every few turns.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def search_function(store: StorageEngine) -> Callable[[str, int, MemoryScope], Awaitable[list[dict[str, object]]]]:
    """The agent's session_search tool, backed by the store's full-text search over the sessions of one
    person or shared conversation (the scope its session's memory has too)."""

    async def search(query: str, limit: int, scope: MemoryScope) -> list[dict[str, object]]:
        hits = await store.search(query, limit=limit, owner=search_owner(scope))
        return [
            {"session_id": h.session_id, "role": h.role, "snippet": h.snippet, "platform": h.platform,
             "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(h.created_at)), "title": h.session_title}
            for h in hits
        ]  # fmt: skip

    return search


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def request_stop(signum: int) -> None:
        log.info("shutdown.signal", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, request_stop, signum)
