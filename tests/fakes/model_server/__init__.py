"""A local fake of the Anthropic and OpenAI model APIs for tests.

Point the real SDKs at it::

    AsyncAnthropic(api_key="test", base_url=server.base_url)
    AsyncOpenAI(api_key="test", base_url=server.base_url + "/v1")

Script replies with ``server.script(Text("hi"), ToolUse("memory", {...}), RateLimited(2))``
(``CutStream(Text("hi"), after=3)`` drops the connection mid-stream; ``Text("...", pace=50)``
streams the text one word per delta at about 50 words, taken as tokens, per second);
read usage and cache figures from ``server.requests`` / ``server.last_request``, and the pictures
and documents a request carried from ``record.media`` (``media.py``).
Token counting and cache rules are documented in ``prompt.py`` and ``cache.py``; ``stub.py``
serves hand-written event streams that no scripted reply produces.
"""

from __future__ import annotations

from .cache import CacheFigures, FakeClock
from .media import MEDIA_TOKENS, MediaSeen
from .records import RequestRecord
from .replies import (
    MAX_STALL_SECONDS,
    AuthFailed,
    ContextTooLong,
    CutStream,
    ErrorReply,
    InvalidRequest,
    MalformedEvent,
    Overloaded,
    RateLimited,
    Reply,
    ServerError,
    Text,
    Timeout,
    ToolCalls,
    ToolUse,
    Unavailable,
)
from .server import ModelServer, Responder, default_reply

__all__ = (
    "MAX_STALL_SECONDS",
    "MEDIA_TOKENS",
    "AuthFailed",
    "CacheFigures",
    "ContextTooLong",
    "CutStream",
    "ErrorReply",
    "FakeClock",
    "InvalidRequest",
    "MediaSeen",
    "MalformedEvent",
    "ModelServer",
    "Overloaded",
    "RateLimited",
    "Reply",
    "RequestRecord",
    "Responder",
    "ServerError",
    "Text",
    "Timeout",
    "ToolCalls",
    "ToolUse",
    "Unavailable",
    "default_reply",
)
