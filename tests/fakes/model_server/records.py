"""What the fake model server remembers about each request it served."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .cache import CacheFigures
from .media import MediaSeen, media_in
from .prompt import PromptBlock, last_user_text
from .replies import Reply

Api = Literal["anthropic", "openai"]


@dataclass
class RequestRecord:
    """One request and how the server answered it.

    ``headers`` has lower-cased names. ``usage`` is the usage object exactly as
    sent (in the API's own field names); ``figures`` is the same accounting in
    neutral form. Both are ``None`` for error replies, which never touch the
    cache. ``response`` is the JSON body sent (for streams, the message the
    events reassemble into). ``stalled`` marks a :class:`Timeout` reply; if the
    client gave up, ``reply`` stays the ``Timeout`` and ``status`` stays None,
    otherwise they become the default reply sent after the stall.
    """

    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    blocks: list[PromptBlock] = field(default_factory=list, repr=False)
    reply: Reply | None = None
    stalled: bool = False
    status: int | None = None
    figures: CacheFigures | None = None
    usage: dict[str, Any] | None = None
    response: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def model(self) -> str:
        """The requested model name."""
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed reply."""
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        """The request's ``messages`` list."""
        return list(self.body.get("messages") or [])

    @property
    def media(self) -> list[MediaSeen]:
        """The pictures and documents the messages carry (image / document blocks, image_url parts)."""
        return media_in(self.messages)

    @property
    def tools(self) -> list[Mapping[str, Any]]:
        """The request's ``tools`` list."""
        return list(self.body.get("tools") or [])

    @property
    def prompt_tokens(self) -> int:
        """Counted prompt tokens (cached or not), as the context limit sees them."""
        return sum(block.tokens for block in self.blocks)

    @property
    def last_user_text(self) -> str:
        """Text of the latest user message with text (tool results skipped)."""
        return last_user_text(self.messages)

    @property
    def ends_with_tool_result(self) -> bool:
        """True when the last message carries tool results back to the model."""
        if not self.messages:
            return False
        last = self.messages[-1]
        if self.api == "openai":
            return last.get("role") == "tool"
        content = last.get("content")
        return isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") == "tool_result" for block in content
        )

    @property
    def cache_read(self) -> int:
        """Prompt tokens read from cache (0 for errors)."""
        return self.figures.cache_read if self.figures else 0

    @property
    def cache_creation(self) -> int:
        """Prompt tokens written to cache (always 0 on OpenAI)."""
        return self.figures.cache_creation if self.figures else 0

    def header(self, name: str) -> str | None:
        """A request header by case-insensitive name."""
        return self.headers.get(name.lower())
