"""Keeping a platform's "typing..." indicator alive while the agent works."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

import structlog

from adapters.contract import Adapter

log = structlog.get_logger("gateway.typing")

REFRESH_SECONDS = 4.0
"""Telegram shows typing for about 5 s per call, Discord for about 10 s: refresh before it fades."""


def typing(
    adapter: Adapter, chat_id: str, thread_id: str | None, *, every: float = REFRESH_SECONDS
) -> AbstractAsyncContextManager[None]:
    """Show typing in the chat for as long as the block runs; failures only cost the indicator."""
    return _Typing(adapter, chat_id, thread_id, every)


class _Typing(AbstractAsyncContextManager[None]):
    """One task per block: typing at once, then every ``every`` seconds until the block ends.

    The task is cancelled when the block ends, not waited for: a cancelled task sends nothing
    more (it stops at its next await, and one never started never runs), and every turn would
    otherwise wait a round of the event loop for it. (A class, not ``asynccontextmanager``:
    every turn enters one, so it is spared the generator machinery.)
    """

    __slots__ = ("_adapter", "_chat_id", "_every", "_task", "_thread_id")

    def __init__(self, adapter: Adapter, chat_id: str, thread_id: str | None, every: float) -> None:
        self._adapter = adapter
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._every = every
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self._task = asyncio.create_task(self._refresh(), name=f"typing:{self._adapter.platform}:{self._chat_id}")

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _refresh(self) -> None:
        while True:
            try:
                await self._adapter.typing(self._chat_id, self._thread_id)
            except Exception as error:  # noqa: BLE001 - an indicator must never break a turn
                log.debug("typing.failed", platform=self._adapter.platform, chat=self._chat_id, error=str(error))
            await asyncio.sleep(self._every)
