"""Translating SDK exceptions into :class:`agent.errors.ProviderError`, in one place.

Both SDKs expose the same three families under the same names
(``APITimeoutError``, ``APIConnectionError``, ``APIStatusError`` with
``status_code`` and response headers), so one mapping serves both; each
provider passes its SDK module.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agent.errors import ContextTooLongError, ErrorKind, ProviderError

_CONTEXT_WORDING = ("prompt is too long", "context_length_exceeded", "maximum context length", "context window", "too many tokens")


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
    if isinstance(error, sdk.APIStatusError):
        status = int(getattr(error, "status_code", 0) or 0)
        message = str(getattr(error, "message", "") or error)
        response = getattr(error, "response", None)
        kind = kind_for_status(status, f"{message} {getattr(error, 'body', '')}")
        error_type = ContextTooLongError if kind is ErrorKind.CONTEXT_LENGTH else ProviderError
        return error_type(
            kind,
            message,
            provider=provider,
            model=model,
            status=status,
            retry_after=retry_after_seconds(getattr(response, "headers", None)),
        )
    raise error
