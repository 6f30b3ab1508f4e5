"""What a tool returned, as the tool message the conversation keeps.

A tool returns text, or a :class:`agent.tools.ToolResult` (text, pictures, and whether it
failed). The message keeps:

* the text; a failure's text starts with :data:`agent.messages.ERROR_PREFIX` (added when the tool
  did not write it). The prefix is the one mark of a failed call, so it survives storage on every
  engine and a restart unchanged: providers read it (:func:`agent.messages.is_error`), Anthropic's
  as ``is_error: true`` on the ``tool_result``, the others as the text itself. The loop's own
  failures (a timeout, an exception, an unknown tool, bad arguments) carry it too;
* each picture as a :class:`agent.media.MediaPart` of origin ``"tool"``: its bytes kept through
  the injected :class:`agent.media.MediaSink`, never in the message. A picture that cannot be kept
  (no sink, not a picture, damaged) is a line in the text saying so, so the model knows it
  missed something.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from agent.media import TOOL_ORIGIN, KeptImage, MediaPart, MediaSink
from agent.messages import ChatMessage, ToolCall, error_text
from agent.tools.registry import ToolImage, ToolResult

log = structlog.get_logger("agent.tools")


async def tool_message(
    call: ToolCall,
    result: str | ToolResult,
    sink: MediaSink | None,
    *,
    clock: Callable[[], float] = time.time,
) -> ChatMessage:
    """The tool message answering ``call`` with ``result``."""
    if isinstance(result, str):
        return ChatMessage.tool(call.id, result, call.name)
    text = error_text(result.text) if result.is_error else result.text
    parts: list[MediaPart] = []
    notes: list[str] = []
    now = clock()
    for number, image in enumerate(result.images, 1):
        kept = await _keep(call, image, sink, number)
        if isinstance(kept, str):
            notes.append(kept)
        else:
            parts.append(
                MediaPart(kind="image", mime=kept.mime, sha256=kept.sha256, size=kept.size, origin=TOOL_ORIGIN,
                          width=kept.width, height=kept.height, sent_at=now)
            )  # fmt: skip
    if notes:
        text = "\n".join([text, *notes]) if text else "\n".join(notes)
    return ChatMessage(role="tool", content=text, tool_call_id=call.id, tool_name=call.name, media=tuple(parts))


async def _keep(call: ToolCall, image: ToolImage, sink: MediaSink | None, number: int) -> KeptImage | str:
    """The picture kept, or the line that stands for it when it could not be."""
    if sink is None:
        return f"[picture {number} the tool returned ({image.mime}) is not shown: this agent keeps no pictures]"
    try:
        return await sink.keep_image(image.data, image.mime)
    except Exception as error:  # noqa: BLE001 - a bad picture costs the picture, never the turn
        log.warning("tool.image_rejected", tool=call.name, mime=image.mime, bytes=len(image.data), error=str(error))
        return f"[picture {number} the tool returned ({image.mime}) is not shown: {error}]"
