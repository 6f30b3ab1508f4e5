"""Append to one session forever, printing what was acknowledged; the test kills it with SIGKILL.

    python tests/storage/crash_writer.py DB

Each append call adds BATCH messages in one call. After the call returns (the
messages are committed), the process prints ``ack <first seq> <last seq>``.
Several appends are kept in flight at once so group commit has work to group.
"""

import asyncio
import sys
from pathlib import Path

import structlog

from storage import NewMessage, Store

BATCH = 3
IN_FLIGHT = 8


async def main(path: Path) -> None:
    store = await Store.open(path)
    session = await store.create_session(session_key="crash:1", platform="telegram", chat_id="1")
    print(f"session {session.id}", flush=True)
    counter = 0

    async def writer() -> None:
        nonlocal counter
        while True:
            counter += 1
            n = counter
            messages = [NewMessage("user", f"message {n}.{part} " + "x" * 200) for part in range(BATCH)]
            records = await store.append_messages(session.id, messages)
            print(f"ack {records[0].seq} {records[-1].seq} {n}", flush=True)

    await asyncio.gather(*(writer() for _ in range(IN_FLIGHT)))


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is for acks
    asyncio.run(main(Path(sys.argv[1])))
