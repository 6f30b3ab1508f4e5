"""Keeping a platform's "typing..." indicator alive while the agent works."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog

from adapters.base import Adapter

log = structlog.get_logger("gateway.typing")

REFRESH_SECONDS = 4.0
"""Telegram shows typing for about 5 s per call, Discord for about 10 s: refresh before it fades."""


@contextlib.asynccontextmanager
async def typing(adapter: Adapter, chat_id: str, thread_id: str | None, *, every: float = REFRESH_SECONDS) -> AsyncIterator[None]:
    """Show typing in the chat for as long as the block runs; failures only cost the indicator."""

    async def refresh() -> None:
        while True:
            try:
                await adapter.typing(chat_id, thread_id)
            except Exception as error:  # noqa: BLE001 - an indicator must never break a turn
                log.debug("typing.failed", platform=adapter.platform, chat=chat_id, error=str(error))
            await asyncio.sleep(every)

    task = asyncio.create_task(refresh(), name=f"typing:{adapter.platform}:{chat_id}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
