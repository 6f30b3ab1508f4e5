"""Translating SDK exceptions into :class:`agent.errors.ProviderError`, in one place.

Both SDKs expose the same three families under the same names
(``APITimeoutError``, ``APIConnectionError``, ``APIStatusError`` with
``status_code`` and response headers), so one mapping serves both; each
provider passes its SDK module. An error reported inside a stream that had
already started comes with status 200 (Anthropic) or as a bare ``APIError``
(OpenAI-compatible servers); its kind is read from the error body.

Reading an answer can fail outside those families: the connection drops
mid-stream (the HTTP library's own ``RemoteProtocolError``, which the Anthropic
SDK lets through), or an event or body is not JSON or not shaped as the API
sends it (``ValueError`` and the like from the SDK's decoding). Those are
:data:`READ_FAILURES`; :func:`failed_call` makes them retryable errors
(``connection``, ``timeout``, ``malformed``) carrying what the call billed.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

try:  # the HTTP library the SDKs use (renamed httpx2 in their newer releases)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs
    import httpx  # type: ignore[no-redef]

from agent.errors import ContextTooLongError, ErrorKind, ProviderError
from agent.usage import Usage

READ_FAILURES: tuple[type[Exception], ...] = (
    httpx.TransportError,
    ValueError,  # JSON that does not parse; pydantic's ValidationError
    LookupError,  # an event for a content block that never started
    TypeError,
    AttributeError,  # a chunk without the fields every chunk has
    RuntimeError,  # the SDK's "unexpected event order"
)
"""What reading a started answer raises besides the SDK's own ``APIError``: a cut, or an unreadable event."""

_CONTEXT_WORDING = (
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "too many tokens",
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "context size",  # llama.cpp: "the request exceeds the available context size"
    "exceed_context_size",
)
# The error types an API names in an error body (Anthropic's ``error.type``; OpenAI-compatible ``type``/``code``).
_KIND_FOR_TYPE = {
    "overloaded_error": ErrorKind.OVERLOADED,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "api_error": ErrorKind.SERVER,
    "server_error": ErrorKind.SERVER,
    "timeout_error": ErrorKind.TIMEOUT,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.AUTH,
    "not_found_error": ErrorKind.NOT_FOUND,
    "request_too_large": ErrorKind.CONTEXT_LENGTH,
    "context_length_exceeded": ErrorKind.CONTEXT_LENGTH,
    "invalid_request_error": ErrorKind.BAD_REQUEST,
}


def kind_for_status(status: int, text: str) -> ErrorKind:
    lowered = text.lower()
    if status == 413 or (status == 400 and any(word in lowered for word in _CONTEXT_WORDING)):
        return ErrorKind.CONTEXT_LENGTH
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status in (503, 529):
        return ErrorKind.OVERLOADED
    if status == 408:
        return ErrorKind.TIMEOUT
    if status >= 500:
        return ErrorKind.SERVER
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 404:
        return ErrorKind.NOT_FOUND
    return ErrorKind.BAD_REQUEST


def kind_for_body(body: Any, text: str) -> ErrorKind:
    """The kind of an error reported inside a stream that had already started (HTTP 200), from its body.

    Anthropic sends ``event: error`` (``overloaded_error`` and the like) and OpenAI-compatible routers a
    ``{"error": {...}}`` chunk; with no status to go by, an unrecognised one counts as a server error,
    which is retried and then falls back.
    """
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and code >= 400:
            return kind_for_status(code, text)
        for key in ("type", "code"):
            kind = _KIND_FOR_TYPE.get(str(error.get(key)))
            if kind is ErrorKind.BAD_REQUEST and any(word in text.lower() for word in _CONTEXT_WORDING):
                return ErrorKind.CONTEXT_LENGTH
            if kind is not None:
                return kind
    return ErrorKind.SERVER


def retry_after_seconds(headers: Any) -> float | None:
    """The server's requested pause, from ``retry-after-ms`` or ``retry-after`` (seconds)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


def translate(error: Exception, *, sdk: ModuleType, provider: str, model: str) -> ProviderError:
    """The ProviderError for an exception raised by ``sdk`` (the anthropic or openai module)."""
    if isinstance(error, sdk.APITimeoutError):
        return ProviderError(ErrorKind.TIMEOUT, "the model did not answer in time", provider=provider, model=model)
    if isinstance(error, sdk.APIConnectionError):
        return ProviderError(ErrorKind.CONNECTION, f"could not reach the API: {error}", provider=provider, model=model)
    if isinstance(error, sdk.APIError):  # a status error, or an error reported inside a started stream
        status = int(getattr(error, "status_code", 0) or 0)
        message = str(getattr(error, "message", "") or error)
        text = f"{message} {getattr(error, 'body', '')}"
        kind = kind_for_status(status, text) if status >= 400 else kind_for_body(getattr(error, "body", None), text)
        error_type = ContextTooLongError if kind is ErrorKind.CONTEXT_LENGTH else ProviderError
        return error_type(
            kind,
            message,
            provider=provider,
            model=model,
            status=status or None,
            retry_after=retry_after_seconds(getattr(getattr(error, "response", None), "headers", None)),
        )
    raise error


def failed_call(
    error: Exception | None, *, sdk: ModuleType, provider: str, model: str, started: bool, billed: Usage = Usage()
) -> ProviderError:
    """The ProviderError for a call whose answer did not arrive whole, carrying what the API reported as used.

    ``error`` is what making the request or reading the answer raised (an SDK ``APIError`` or one of
    :data:`READ_FAILURES`), or None when a stream ended cleanly but without the answer's end.
    ``started``: some of the answer had arrived, so a lost connection is a cut, not an unreachable API.
    """
    if isinstance(error, sdk.APIConnectionError) and started and isinstance(error.__cause__, httpx.TransportError):
        error = error.__cause__  # the OpenAI SDK wraps a cut as "Connection error."
    if error is None:
        failure = ProviderError(ErrorKind.CONNECTION, "the answer stream ended before the answer did", provider=provider, model=model)
    elif isinstance(error, sdk.APIError):
        failure = translate(error, sdk=sdk, provider=provider, model=model)
    elif isinstance(error, httpx.TimeoutException):
        failure = ProviderError(ErrorKind.TIMEOUT, f"the answer stream stalled: {error}", provider=provider, model=model)
    elif isinstance(error, httpx.TransportError):
        failure = ProviderError(ErrorKind.CONNECTION, f"the answer stream was cut off: {error}", provider=provider, model=model)
    else:
        reason = f"{type(error).__name__}: {error}"
        failure = ProviderError(ErrorKind.MALFORMED, f"the answer could not be read ({reason})", provider=provider, model=model)
    failure.billed = billed if billed != Usage() else None
    return failure
