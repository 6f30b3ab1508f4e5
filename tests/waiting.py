"""Waiting in tests for something the code under test does in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def eventually(predicate: Callable[[], Any], *, timeout: float = 30.0) -> None:
    """Wait until ``predicate()`` holds (the timeout only stops a hang; it is not what is tested)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)
