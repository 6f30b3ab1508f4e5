"""Calling the model with retries and fallbacks.

Each configured model gets a bounded number of attempts on retryable errors
(429, 5xx, 529 overloaded, timeouts, connection errors, streams cut off or
broken mid-answer) with exponential backoff and jitter, honouring the server's
``retry-after``. Then the next fallback model is tried. A context-length error
is raised at once: the caller compacts and tries again. When every model
failed, :class:`ModelUnavailableError` carries a message fit to show the user.
Each model gets the request in its own terms: its name, its caching, and whether
it sees images (a fallback without vision gets stand-ins for the pictures).

A failed attempt may still have been billed (a stream cut after the API had
reported the prompt's usage): the caller's ``on_billed`` hears of each one,
so the turn's usage and cost include it.

The caller's ``on_text`` hears every attempt's text as it is written; an attempt
that starts after one that had shown some (a retry, or the next model) first
withdraws it (``on_text("")``), so what is shown is always one attempt's text.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

import structlog
from tenacity import RetryCallState, wait_exponential

from agent.caching import CachePolicy
from agent.errors import ContextTooLongError, ErrorKind, ModelUnavailableError, ProviderError
from agent.media import ProviderStyle, vision_default
from agent.providers.base import ModelRequest, ModelResponse, Provider
from agent.providers.text_feed import TextFeed, TextListener
from agent.usage import Usage

log = structlog.get_logger("agent.model")

Sleep = Callable[[float], Awaitable[None]]
Billed = Callable[[str, Usage], Awaitable[None]]
"""Told of a failed attempt's usage: the model it went to, and what the API reported before it failed."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 4
    """Attempts per model, the first included."""
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.5
    """Up to this share of the delay is added at random, so clients do not retry in step."""
    max_retry_after: float = 120.0
    """A longer retry-after is not waited for: the next model is tried instead."""

    def delay(self, attempt: int, retry_after: float | None, rand: float) -> float:
        if retry_after is not None:
            return retry_after + rand * self.jitter
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = attempt
        backoff = wait_exponential(multiplier=self.base_delay, max=self.max_delay)(state)
        return backoff + rand * self.jitter * backoff


@dataclass(frozen=True, slots=True)
class ModelTarget:
    """One model on one endpoint, with the caching that endpoint supports and whether it sees images."""

    provider: Provider
    model: str
    cache: CachePolicy
    vision: bool | None = None
    """Whether the model reads images (and PDFs as documents); None: the built-in table by its name."""

    @property
    def style(self) -> ProviderStyle:
        """The wire format its media and token counts follow."""
        return "anthropic" if self.provider.name == "anthropic" else "openai"

    @property
    def sees_images(self) -> bool:
        """``vision`` as configured, else :func:`agent.media.vision_default`."""
        return self.vision if self.vision is not None else vision_default(self.style, self.model)


class ModelRouter:
    def __init__(
        self,
        targets: Sequence[ModelTarget],
        policy: RetryPolicy = RetryPolicy(),
        *,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not targets:
            raise ValueError("at least one model is needed")
        self.targets = list(targets)
        self._policy = policy
        self._sleep = sleep
        self._rand = rand

    @property
    def primary(self) -> ModelTarget:
        return self.targets[0]

    async def complete(
        self, request: ModelRequest, *, on_billed: Billed | None = None, on_text: TextListener | None = None
    ) -> ModelResponse:
        """The first model that answers, in order; raises ContextTooLongError or ModelUnavailableError.

        ``on_text``: told each attempt's text so far while it streams (see the module docstring).
        """
        failures: list[ProviderError] = []
        feed = TextFeed.of(on_text) if on_text is not None else None
        for index, target in enumerate(self.targets):
            try:
                return await self._with_retries(target, _for_target(request, target), on_billed, feed)
            except ContextTooLongError:
                raise
            except ProviderError as error:
                failures.append(error)
                if not error.kind.falls_back:
                    break
                if index + 1 < len(self.targets):
                    nxt = self.targets[index + 1]
                    log.warning("model.fallback", failed=target.model, kind=error.kind.value, next=nxt.model)
        raise ModelUnavailableError(user_message(failures[-1]), causes=failures)

    async def _with_retries(
        self, target: ModelTarget, request: ModelRequest, on_billed: Billed | None, feed: TextFeed | None
    ) -> ModelResponse:
        attempt = 1
        while True:
            if feed is not None:
                feed.restart()  # what an earlier attempt showed is not this one's text
            try:
                return await target.provider.complete(request, on_text=feed)
            except ProviderError as error:
                if error.billed is not None and on_billed is not None:
                    await on_billed(target.model, error.billed)
                if not error.kind.retryable or attempt >= self._policy.max_attempts:
                    raise
                if error.retry_after is not None and error.retry_after > self._policy.max_retry_after:
                    raise
                delay = self._policy.delay(attempt, error.retry_after, self._rand())
                log.warning(
                    "model.retry",
                    provider=target.provider.name,
                    model=target.model,
                    kind=error.kind.value,
                    status=error.status,
                    error=error.args[0],
                    attempt=attempt,
                    delay_s=round(delay, 2),
                )
                await self._sleep(delay)
                attempt += 1


def _for_target(request: ModelRequest, target: ModelTarget) -> ModelRequest:
    ttl = request.cache_ttl if target.cache.enabled else None
    wanted = (target.model, ttl, target.cache.native, target.sees_images)
    if (request.model, request.cache_ttl, request.cache_native, request.vision) == wanted:
        return request  # the primary target, as the loop asked: no copy of a frozen request per call
    return replace(request, model=target.model, cache_ttl=ttl, cache_native=target.cache.native, vision=target.sees_images)


def user_message(error: ProviderError) -> str:
    """What the person in the chat is told when no model could answer."""
    if error.kind in (ErrorKind.AUTH,):
        return (
            "I can't reach my language model: its credentials were rejected. "
            "The bot's operator needs to check the API key (details are in gateway.log)."
        )
    if error.kind is ErrorKind.NOT_FOUND:
        return "The configured model does not exist at its provider. The bot's operator needs to fix model.name."
    if error.kind is ErrorKind.BAD_REQUEST:
        return "The model refused this request as malformed. The bot's operator can find the details in gateway.log."
    busy = {
        ErrorKind.RATE_LIMIT: "is rate-limiting me",
        ErrorKind.OVERLOADED: "is overloaded",
        ErrorKind.SERVER: "is having an outage",
        ErrorKind.TIMEOUT: "did not answer in time",
        ErrorKind.CONNECTION: "cannot be reached",
        ErrorKind.MALFORMED: "is sending answers I cannot read",
    }.get(error.kind, "failed")
    return f"The model service {busy} right now, so I couldn't answer. Please send your message again in a minute."
