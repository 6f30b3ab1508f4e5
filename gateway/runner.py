"""``switchboard run``: from a loaded configuration to a running gateway and back to exit 0.

Exit statuses: 0 after a clean shutdown (SIGINT/SIGTERM), 2 when the
configuration cannot run (the message names what to set), 1 when no adapter
could start.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from adapters.base import Adapter, AdapterError
from config.loader import LoadedConfig
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.app import Gateway
from storage import Store

log = structlog.get_logger("gateway")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


def report_blockers(blockers: Sequence[str]) -> None:
    lines = ["Switchboard cannot start:", *(f"  - {line}" for line in blockers)]
    print("\n".join(lines), file=sys.stderr)
    for line in blockers:
        log.error("run.blocked", reason=line)


async def run_gateway(loaded: LoadedConfig, extra_adapters: Sequence[Adapter] = ()) -> int:
    """Run until SIGINT/SIGTERM; returns the process exit status."""
    plan = build_plan(loaded, extra_platforms=[adapter.platform for adapter in extra_adapters])
    if not plan.ready:
        report_blockers(plan.blockers)
        return EXIT_CONFIG
    try:
        adapters = load_adapters(plan.enabled, loaded) + list(extra_adapters)
    except AdapterError as error:
        report_blockers([str(error)])
        return EXIT_CONFIG

    store = await Store.open(loaded.db_path, synchronous=loaded.settings.storage.synchronous)
    gateway = Gateway(loaded, store, adapters)
    stop = asyncio.Event()
    _install_signal_handlers(stop)
    try:
        if await gateway.start() == 0:
            log.error("run.no_adapter_running", hint="see the adapter.start_failed lines above")
            print("Switchboard stopped: no platform adapter could start (details in the log).", file=sys.stderr)
            return EXIT_FAILED
        await stop.wait()
    finally:
        await gateway.shutdown()
    return EXIT_OK


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def request_stop(signum: int) -> None:
        log.info("shutdown.signal", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, request_stop, signum)
