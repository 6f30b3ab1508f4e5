"""The turns under way, by session: where each one is and whom it answers, while it runs.

A tool call knows only its session (``ToolContext.session_id``). Whoever must talk to the person in
the middle of a turn (asking before a tool runs: :mod:`gateway.tools.approval`) looks the session up
here and gets the turn's :class:`TurnOrigin`: the chat, the topic, the person and the message the
turn answers. :class:`gateway.turn.runner.TurnRunner` enters a turn while its agent runs and removes
it when the agent is done, whatever the outcome; a session has at most one turn under way (its lane).
The key is the agent session's id, the one its tools see (it stays the same when a compaction
splits the stored session inside a turn).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from adapters.contract import InboundMessage


@dataclass(frozen=True, slots=True)
class TurnOrigin:
    """Where a running turn is and whom it answers."""

    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str
    """The person whose message the turn answers (of several coalesced messages, the latest one's)."""
    user_name: str
    message_id: str | None
    """That message (a question to the person replies to it)."""
    task: asyncio.Task[object] | None = None
    """The task running the turn: cancelled when the turn is stopped (``/stop``, a newer message, shutdown)."""

    @classmethod
    def of(cls, batch: list[InboundMessage]) -> TurnOrigin:
        """The origin of a turn answering ``batch`` (messages of one session), run by the current task."""
        last = batch[-1]
        return cls(last.platform, last.chat_id, last.thread_id, last.user_id, last.user_name, last.message_id,
                   asyncio.current_task())  # fmt: skip

    @property
    def stopping(self) -> bool:
        """Whether the turn's task is being cancelled (stopped), as opposed to only a part of it."""
        return self.task is not None and self.task.cancelling() > 0


class RunningTurns:
    def __init__(self) -> None:
        self._by_session: dict[str, TurnOrigin] = {}

    @contextlib.contextmanager
    def running(self, session_id: str, origin: TurnOrigin) -> Iterator[None]:
        """Known as running for as long as the block runs."""
        self._by_session[session_id] = origin
        try:
            yield
        finally:
            if self._by_session.get(session_id) is origin:
                del self._by_session[session_id]

    def get(self, session_id: str) -> TurnOrigin | None:
        """The running turn of ``session_id``, or None when none is under way."""
        return self._by_session.get(session_id)

    def __len__(self) -> int:
        return len(self._by_session)
