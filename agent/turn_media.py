"""The bytes of a turn's pictures and documents, read once per turn through the injected source.

Before each model call the loop asks :meth:`TurnMedia.read` for the bytes of every part in the
request, for every model that may answer it (the main one and its fallbacks: a model without
vision needs a PDF's text, one with vision the PDF itself). What was read stays for the rest of
the turn, so the calls of a tool loop read each file once; what is gone (pruned after the
retention period, or a read that failed) is left out, and the part goes as a stand-in. Files
a request leaves out anyway (the oldest past its limits) are not read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence

import structlog

from agent.media import MediaSource, ProviderStyle
from agent.messages import ChatMessage
from agent.providers.media_blocks import left_out, needed

log = structlog.get_logger("agent.media")


class TurnMedia:
    """One turn's cache of media bytes, by name (``sha256`` / ``text_sha256``)."""

    def __init__(self, source: MediaSource | None, readers: Iterable[tuple[ProviderStyle, bool]]) -> None:
        """``readers``: the (style, vision) of every model a request may go to."""
        self._source = source
        self._readers = tuple(dict.fromkeys(readers))
        self._read: dict[str, bytes | None] = {}

    async def read(self, messages: Sequence[ChatMessage]) -> Mapping[str, bytes]:
        """The bytes the parts in ``messages`` need, as far as they are still kept."""
        names = {name for style, vision in self._readers for name in _names(messages, style, vision)}
        missing = [name for name in names if name not in self._read]
        if missing:
            found = await asyncio.gather(*(self._one(name) for name in missing))
            self._read.update(zip(missing, found, strict=True))
        return {name: data for name in names if (data := self._read[name]) is not None}

    async def _one(self, name: str) -> bytes | None:
        if self._source is None:
            return None
        try:
            data = await self._source.read(name)
        except Exception as error:  # noqa: BLE001 - an unreadable file is a stand-in, never a failed turn
            log.warning("media.read_failed", sha256=name, error=f"{type(error).__name__}: {error}")
            return None
        if data is None:
            log.debug("media.gone", sha256=name)
        return data


def _names(messages: Sequence[ChatMessage], style: ProviderStyle, vision: bool) -> Iterator[str]:
    """The bytes a request of ``style`` and ``vision`` on ``messages`` sends."""
    omitted = left_out(messages, style=style, vision=vision)
    for at, message in enumerate(messages):
        for index, part in enumerate(message.media):
            name = needed(part, style=style, vision=vision)
            if name is not None and (at, index) not in omitted:
                yield name
