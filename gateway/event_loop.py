"""The event loop the gateway runs on: uvloop where it is installed, else asyncio's own.

Every message passes through a few dozen callbacks and task switches between the
adapter and the reply; uvloop runs those in C, so the loop spends less CPU on
each turn than asyncio's own does. ``gateway.event_loop: asyncio`` keeps the
standard loop (for debugging, or should a library misbehave on uvloop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Choice = Literal["auto", "uvloop", "asyncio"]


def loop_factory(choice: Choice = "auto") -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for the chosen loop; ``uvloop`` fails clearly when it is not installed.

    ``gateway.started`` in the log names the loop in use (``loop=uvloop``).
    """
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as error:
        if choice == "uvloop":
            raise RuntimeError(
                "gateway.event_loop is 'uvloop' but uvloop is not installed: "
                "run `pip install uvloop`, or set gateway.event_loop to 'auto'"
            ) from error
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], factory: Callable[[], asyncio.AbstractEventLoop]) -> T:
    """``asyncio.run(main)`` on a loop from ``factory`` (see :func:`loop_factory`)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
