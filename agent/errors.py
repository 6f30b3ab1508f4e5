"""The agent's errors. Each carries what a caller needs to decide what to do next.

::

    AgentError
    ├── ProviderError            a model call failed (kind, status, retry_after, what it billed)
    │   └── ContextTooLongError  the prompt does not fit the model's window
    └── ModelUnavailableError    every configured model failed; the text is fit for the user
"""

from __future__ import annotations

from enum import StrEnum

from agent.usage import Usage


class AgentError(Exception):
    """Base of every error the agent raises on purpose."""


class ErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER = "server"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    CONTEXT_LENGTH = "context_length"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    BAD_REQUEST = "bad_request"
    MALFORMED = "malformed"
    """The answer came but could not be read (an event or body that is not what the API sends)."""

    @property
    def retryable(self) -> bool:
        """Worth trying the same model again after a pause."""
        return self in {
            ErrorKind.RATE_LIMIT,
            ErrorKind.OVERLOADED,
            ErrorKind.SERVER,
            ErrorKind.TIMEOUT,
            ErrorKind.CONNECTION,
            ErrorKind.MALFORMED,
        }

    @property
    def falls_back(self) -> bool:
        """Worth trying the next configured model."""
        return self.retryable or self in {ErrorKind.AUTH, ErrorKind.NOT_FOUND}


class ProviderError(AgentError):
    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        status: int | None = None,
        retry_after: float | None = None,
        billed: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.provider = provider
        self.model = model
        self.status = status
        self.retry_after = retry_after
        self.billed = billed
        """What the API reported as used before the call failed (a stream cut after its start), if anything."""

    def __str__(self) -> str:
        status = f" {self.status}" if self.status else ""
        return f"{self.provider} {self.model}:{status} {self.kind.value}: {self.args[0]}"


class ContextTooLongError(ProviderError):
    """The request exceeded the model's context window."""


class ModelUnavailableError(AgentError):
    """No configured model could answer. ``user_message`` says so in plain words."""

    def __init__(self, user_message: str, *, causes: list[ProviderError]) -> None:
        super().__init__(user_message)
        self.user_message = user_message
        self.causes = causes
