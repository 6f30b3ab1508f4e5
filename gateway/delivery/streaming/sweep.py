"""At start: the streamed messages a crash left half written whose turn will not run again.

A live outbox row whose turn's inbound event is still unfinished is left alone: the turn runs
again and adopts it (the message is edited to the answer, never posted again). Any other live
row (its event answered, stopped or given up, or gone) ends with what it showed and the
interrupted mark: a pending edit, sent by the outbox's resume like any other. With several
gateways, the store lists only the live rows that are free or this replica's: one of another live
replica belongs to the turn it runs now.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import structlog

from adapters.contract import Adapter
from gateway.delivery.streaming.marks import INTERRUPTED_MARK, marked
from storage import StorageEngine

log = structlog.get_logger("gateway.stream")


async def close_orphaned_streams(
    store: StorageEngine, adapters: Mapping[str, Adapter], unfinished: Collection[tuple[str, str]]
) -> int:
    """Close every live row whose turn will not run again; ``unfinished``: the inbox's unfinished
    ``(platform, event_id)``. Returns how many were closed (their edits are pending now)."""
    closed = 0
    for row in await store.outbox_live():
        platform, _, event_id = row.turn_id.partition(":")  # a turn's id is PLATFORM:EVENT_ID
        if (platform, event_id) in unfinished:
            continue  # its turn runs again and takes the message over
        adapter = adapters.get(row.platform)
        if adapter is None:
            continue  # not configured now: left live until it is
        text, plain = marked(row.text, row.plain, INTERRUPTED_MARK, adapter.capabilities)
        if await store.outbox_stream_close(row.id, text, plain=plain) is not None:
            closed += 1
        log.info("stream.interrupted", platform=row.platform, chat=row.chat_id, outbox_id=row.id,
                 shown=row.platform_message_id is not None)  # fmt: skip
    return closed
