"""Reply objects a test scripts into the fake model server.

A reply says what the "model" does with one request. The same reply renders
into either API's wire format:

* :class:`Text` - an assistant text turn (``end_turn`` / ``stop``).
* :class:`ToolUse` - one tool call; :class:`ToolCalls` - several, optionally
  preceded by text (``tool_use`` / ``tool_calls``).

A text (a :class:`Text`, or the text before a :class:`ToolCalls`' calls) with a
``pace`` is written like a model writes it: one word per streamed delta, ``pace``
words (taken as tokens) per second (see ``pacing.py``).
* :class:`ErrorReply` subclasses - an HTTP error in the API's own JSON shape.
* :class:`Timeout` - hold the request open longer than the client waits.
* :class:`CutStream` / :class:`MalformedEvent` - a success reply whose stream
  breaks: the connection drops after some events, or an event is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

MAX_STALL_SECONDS = 10.0
"""Upper bound on how long a :class:`Timeout` reply may hold a request."""


@dataclass(frozen=True)
class Text:
    """A plain assistant text reply.

    ``truncated=True`` reports the turn as cut off (``max_tokens`` / ``length``). ``pace``: tokens
    (words) per second the text streams at, one word per delta; None streams it at once in
    16-character pieces.
    """

    text: str
    truncated: bool = False
    pace: float | None = None

    def __post_init__(self) -> None:
        check_pace(self.pace)


@dataclass(frozen=True)
class ToolUse:
    """One tool call. ``id`` is generated deterministically when omitted."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The call's input as compact JSON (OpenAI ``arguments``)."""
        return json.dumps(dict(self.input), separators=(",", ":"), ensure_ascii=False)


class ToolCalls:
    """A reply carrying one or more tool calls, optionally preceded by text (streamed at ``pace``
    words per second when given, as :class:`Text` does; the calls follow at once)."""

    __slots__ = ("calls", "pace", "text")

    def __init__(self, *calls: ToolUse, text: str | None = None, pace: float | None = None) -> None:
        if not calls:
            raise ValueError("ToolCalls needs at least one ToolUse")
        check_pace(pace)
        self.calls: tuple[ToolUse, ...] = calls
        self.text = text
        self.pace = pace

    def __repr__(self) -> str:
        paced = "" if self.pace is None else f", pace={self.pace!r}"
        return f"ToolCalls({', '.join(map(repr, self.calls))}, text={self.text!r}{paced})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCalls) and (self.calls, self.text, self.pace) == (other.calls, other.text, other.pace)

    def __hash__(self) -> int:
        return hash((self.calls, self.text, self.pace))


def check_pace(pace: float | None) -> None:
    """Refuse a pace no model could write at."""
    if pace is not None and not pace > 0:
        raise ValueError(f"pace is tokens per second and must be above 0, got {pace!r}")


@dataclass(frozen=True)
class ErrorReply:
    """Base for HTTP error replies; subclasses fix the status and wording.

    Each subclass names the error in both APIs: the Anthropic ``error.type``
    and the OpenAI ``type`` / ``code``. ``message`` overrides the default text.
    """

    message: str | None = field(default=None, kw_only=True)

    status: ClassVar[int] = 500
    anthropic_type: ClassVar[str] = "api_error"
    anthropic_message: ClassVar[str] = "Internal server error"
    openai_status: ClassVar[int | None] = None
    openai_type: ClassVar[str] = "server_error"
    openai_code: ClassVar[str | None] = None
    openai_message: ClassVar[str] = "The server had an error while processing your request. Sorry about that!"

    def status_for(self, api: str) -> int:
        """The HTTP status this error is sent with on ``api``."""
        if api == "openai" and self.openai_status is not None:
            return self.openai_status
        return self.status

    def headers(self) -> dict[str, str]:
        """Extra response headers (e.g. ``retry-after``)."""
        return {}


@dataclass(frozen=True)
class RateLimited(ErrorReply):
    """429 with a ``retry-after`` header in seconds."""

    retry_after: float = 1.0

    status: ClassVar[int] = 429
    anthropic_type: ClassVar[str] = "rate_limit_error"
    anthropic_message: ClassVar[str] = "Number of request tokens has exceeded your per-minute rate limit"
    openai_type: ClassVar[str] = "requests"
    openai_code: ClassVar[str | None] = "rate_limit_exceeded"
    openai_message: ClassVar[str] = "Rate limit reached for requests. Please try again later."

    def headers(self) -> dict[str, str]:
        seconds = self.retry_after
        return {"retry-after": str(int(seconds)) if float(seconds).is_integer() else str(seconds)}


@dataclass(frozen=True)
class ServerError(ErrorReply):
    """500 internal server error."""


@dataclass(frozen=True)
class Unavailable(ErrorReply):
    """503 service unavailable."""

    status: ClassVar[int] = 503
    anthropic_type: ClassVar[str] = "api_error"
    anthropic_message: ClassVar[str] = "Service unavailable"
    openai_type: ClassVar[str] = "server_error"
    openai_code: ClassVar[str | None] = "service_unavailable"
    openai_message: ClassVar[str] = "The server is overloaded or not ready yet."


@dataclass(frozen=True)
class Overloaded(ErrorReply):
    """Anthropic 529 ``overloaded_error``.

    OpenAI has no 529; there it is sent as 503 with OpenAI's overload wording.
    """

    status: ClassVar[int] = 529
    anthropic_type: ClassVar[str] = "overloaded_error"
    anthropic_message: ClassVar[str] = "Overloaded"
    openai_status: ClassVar[int | None] = 503
    openai_type: ClassVar[str] = "server_error"
    openai_code: ClassVar[str | None] = None
    openai_message: ClassVar[str] = "The engine is currently overloaded, please try again later"


@dataclass(frozen=True)
class AuthFailed(ErrorReply):
    """401 authentication error."""

    status: ClassVar[int] = 401
    anthropic_type: ClassVar[str] = "authentication_error"
    anthropic_message: ClassVar[str] = "invalid x-api-key"
    openai_type: ClassVar[str] = "invalid_request_error"
    openai_code: ClassVar[str | None] = "invalid_api_key"
    openai_message: ClassVar[str] = "Incorrect API key provided."


@dataclass(frozen=True)
class ContextTooLong(ErrorReply):
    """400 context-length error in each API's real wording.

    The token figure in the message is the request's counted prompt tokens;
    ``limit`` defaults to one less than that (or the server's context limit).
    """

    limit: int | None = None

    status: ClassVar[int] = 400
    anthropic_type: ClassVar[str] = "invalid_request_error"
    openai_type: ClassVar[str] = "invalid_request_error"
    openai_code: ClassVar[str | None] = "context_length_exceeded"


@dataclass(frozen=True)
class InvalidRequest(ErrorReply):
    """400 generic invalid request (also used for malformed requests)."""

    status: ClassVar[int] = 400
    anthropic_type: ClassVar[str] = "invalid_request_error"
    anthropic_message: ClassVar[str] = "invalid request"
    openai_type: ClassVar[str] = "invalid_request_error"
    openai_message: ClassVar[str] = "invalid request"


@dataclass(frozen=True)
class Timeout:
    """Hold the request open for ``seconds`` (capped at ``MAX_STALL_SECONDS``).

    Use a shorter client timeout to provoke the SDK's timeout error. The hold
    ends early when the client disconnects or the server is reset. A client
    still waiting afterwards gets the default reply, so this also works as a
    "slow reply".
    """

    seconds: float = 5.0

    def bounded_seconds(self) -> float:
        """The hold time after applying the safety cap."""
        return max(0.0, min(self.seconds, MAX_STALL_SECONDS))


SuccessReply: TypeAlias = Text | ToolUse | ToolCalls


@dataclass(frozen=True)
class CutStream:
    """Send ``reply`` but stop after ``after`` events (SSE events, or chunks on OpenAI; a negative
    ``after`` counts from the end: ``-1`` leaves out the last one).

    The connection drops and the body's chunked encoding is never finished, as when a proxy or the
    API's own front end goes away mid-answer: the client's HTTP library reports the body as
    incomplete. With ``abrupt=False`` the body ends properly instead, as if the answer were whole.
    The request is accounted (usage, cache) as the whole reply would have been. A request that did
    not ask for a stream gets the first half of its JSON body, then the drop.
    """

    reply: SuccessReply
    after: int = 1
    abrupt: bool = True


MALFORMED_DATA = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_de'
"""An event cut off inside its JSON, as a broken proxy or upstream might send it."""


@dataclass(frozen=True)
class MalformedEvent:
    """Send ``reply``, with one event whose data is not JSON after the first ``after`` events.

    The broken event takes the name of the event it precedes (Anthropic's SDK skips unnamed
    events); the rest of the reply follows as usual. A request that did not ask for a stream gets
    ``data`` as its whole body.
    """

    reply: SuccessReply
    after: int = 1
    data: str = MALFORMED_DATA


StreamFault: TypeAlias = CutStream | MalformedEvent
Reply: TypeAlias = Text | ToolUse | ToolCalls | ErrorReply | Timeout | CutStream | MalformedEvent


def as_calls(reply: ToolUse | ToolCalls) -> ToolCalls:
    """Normalise a single :class:`ToolUse` into a :class:`ToolCalls`."""
    return reply if isinstance(reply, ToolCalls) else ToolCalls(reply)
