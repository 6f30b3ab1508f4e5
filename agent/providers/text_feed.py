"""The text a model call has written so far, handed on to whoever shows it as it grows.

A provider calls a :class:`TextFeed` with the whole visible text of the attempt under way
after every piece that arrives (never thinking text, never tool-call arguments). The feed
passes each new value to its listener (``TurnObserver.on_text``), skipping repeats, and keeps
the model call safe from the listener: an exception it raises is logged once, at warning,
and the call goes on. When an attempt fails after some text was shown, the next attempt
(a retry, or the fallback model) starts with :meth:`TextFeed.restart`, which tells the
listener ``""`` so the shown text is cleared before the new one grows.

One feed serves a whole turn: the router and the providers reuse the feed they are given
(:meth:`TextFeed.of`), so the turn's listener is warned about once and restarts are seen
across every layer.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

log = structlog.get_logger("agent.model")

TextListener = Callable[[str], None]
"""Called with the full text of the current model call attempt so far; must not block."""


class TextFeed:
    """The shown text of one turn's model calls, passed on to ``listener`` (None: to nobody)."""

    __slots__ = ("_listener", "_shown", "_warned")

    def __init__(self, listener: TextListener | None) -> None:
        self._listener = listener
        self._shown = ""
        self._warned = False

    @classmethod
    def of(cls, listener: TextListener | None) -> TextFeed:
        """``listener`` itself when it is a feed already, else a new feed for it."""
        return listener if isinstance(listener, TextFeed) else cls(listener)

    def __call__(self, text: str) -> None:
        """The attempt has written ``text`` so far (its whole visible text, not the new piece)."""
        if text == self._shown:
            return
        self._shown = text
        if self._listener is None:
            return
        try:
            self._listener(text)
        except Exception as error:  # noqa: BLE001 - whoever shows the text must never break the model call
            if not self._warned:
                self._warned = True
                log.warning("model.text_listener_failed", error=f"{type(error).__name__}: {error}", exc_info=True)

    def restart(self) -> None:
        """A new attempt begins: text a failed one had shown is withdrawn (the listener hears ``""``)."""
        self("")

    def next_call(self) -> None:
        """A new model call of the turn begins after one that ended (the observer heard its message):
        its text starts from nothing, and nothing needs withdrawing."""
        self._shown = ""
