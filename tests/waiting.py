"""Waiting in tests for something the code under test does in the background.

Every test that waits for a condition uses :func:`eventually` (in a coroutine) or
:func:`eventually_sync` (in plain code): both look at the condition again and again until it holds
and return what it gave. Their timeout only stops a hang, with a message that says what was awaited;
it is never what a test checks (the machine is shared and slow at times, so no test asserts a
duration). The suite-wide pytest-timeout (pyproject.toml) is the last guard behind them.

A fixed sleep has no place in a test, with two exceptions, each commented where it stands: pacing
that is part of the scenario (a user typing, a slow client), and a pause that gives the code a chance
to do something wrong when nothing observable says it has had that chance.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

HANG_GUARD = 60.0
"""Seconds a wait may take before it is declared hung (a default; a test may give more)."""
POLL = 0.02
"""Seconds between two looks at the condition."""


async def eventually(
    condition: Callable[[], T | Awaitable[T]],
    what: str = "",
    *,
    timeout: float = HANG_GUARD,
    process: subprocess.Popen[Any] | None = None,
    interval: float = POLL,
) -> T:
    """Wait until ``condition()`` (awaited, if it returns an awaitable) is truthy, and return it.

    ``what`` names the condition in the failure (the condition's source line by default);
    ``process``: fail at once if this subprocess exits meanwhile (a gateway that died answers nothing).
    """
    try:
        async with asyncio.timeout(timeout) as guard:
            while True:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value  # type: ignore[return-value]
                _check_alive(process, condition, what)
                await asyncio.sleep(interval)
    except TimeoutError:
        if guard.expired():
            raise AssertionError(_gave_up(condition, what, timeout)) from None
        raise


def eventually_sync(
    condition: Callable[[], T],
    what: str = "",
    *,
    timeout: float = HANG_GUARD,
    process: subprocess.Popen[Any] | None = None,
    interval: float = POLL,
) -> T:
    """:func:`eventually` for code that is not a coroutine: blocks the thread between looks."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        _check_alive(process, condition, what)
        if time.monotonic() > deadline:
            raise AssertionError(_gave_up(condition, what, timeout))
        time.sleep(interval)
    return value


def _check_alive(process: subprocess.Popen[Any] | None, condition: Callable[[], object], what: str) -> None:
    if process is not None and process.poll() is not None:
        raise AssertionError(f"the process exited with {process.returncode} while waiting for {_named(condition, what)}")


def _gave_up(condition: Callable[[], object], what: str, timeout: float) -> str:
    return f"gave up waiting for {_named(condition, what)} after {timeout:g} s"


def _named(condition: Callable[[], object], what: str) -> str:
    if what:
        return what
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)
