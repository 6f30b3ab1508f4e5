"""What an adapter raises when it cannot do what the gateway asked, above all a send that failed.

Every adapter turns its platform library's exceptions into :class:`DeliveryError`
subclasses the same way: its ``sending`` module has one function
``delivery_error(error, attempt)`` that says which one an exception is (None: not
the platform's, raised as it is), and wraps each platform call in
``with translated(delivery_error, Attempt(...)):``. The gateway's delivery acts
on the class alone (wait, retry, fall back to plain text, give up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from adapters.contract.events import Markup


class AdapterError(Exception):
    """An adapter could not do what was asked; the message says what to do about it."""


class DeliveryError(AdapterError):
    """Sending failed. Adapters translate their platform's errors into these subclasses.

    ::

        DeliveryError
        ├── RateLimited            the platform asked us to wait ``retry_after`` seconds
        ├── MarkupRejected         the platform refused the formatting; plain text may pass
        ├── RecipientUnavailable   blocked, kicked, chat gone: retrying will not help
        └── TransientDeliveryError a network or server hiccup: try again shortly
    """

    retryable = False
    may_have_arrived = False
    """Whether the platform may have carried out the request although no answer came back (the answer
    was lost). A refusal, a rate limit or a failure before the request left says no."""


class RateLimited(DeliveryError):
    retryable = True

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"rate limited: retry after {retry_after:g} s")
        self.retry_after = retry_after


class MarkupRejected(DeliveryError):
    pass


class RecipientUnavailable(DeliveryError):
    pass


class TransientDeliveryError(DeliveryError):
    retryable = True

    def __init__(self, message: str = "", *, unsent: bool = False) -> None:
        """``unsent``: the request surely never reached the platform (no connection was made, or no
        request was made at all), so sending again cannot show anything twice."""
        super().__init__(message)
        self.may_have_arrived = not unsent


class StreamingUnsupported(AdapterError):
    """The platform refused a way of streaming (a draft, its streaming API, a status line) for this chat
    or this bot: an older or local API server, a chat type it does not apply to, a missing scope. It
    will not start working on a retry; the gateway falls back to the next :class:`StreamMode` and
    remembers the refusal for the platform and kind of chat."""


class MediaUnavailable(AdapterError):
    """A file that came with a message could not be downloaded. ``reason`` says why in one word,
    for logs and metrics; the message says it in words a user can be shown.

    Reasons: ``too_large`` (over the ``max_bytes`` asked for, by the platform's claim or while
    reading), ``timeout``, ``redirect`` (the URL sent us to another host), ``gone`` (404/410, an
    expired file), ``refused`` (401/403: a missing scope such as Slack's ``files:read``),
    ``failed`` (any other HTTP or network failure), ``unsupported`` (this platform cannot download files).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Attempt:
    """What a platform call was doing, for the delivery error's message."""

    action: str
    """The call, in the platform's words: ``send``, ``edit``, ``chat.postMessage`` ..."""
    chat_id: str = ""
    markup: Markup = Markup.PLAIN
    """The markup of the text sent: a refusal of formatted text is :class:`MarkupRejected`."""


Translate = Callable[[Exception, Attempt], "DeliveryError | None"]
"""An adapter's classification of its platform's exceptions; None for an exception that is not the platform's."""


@contextlib.contextmanager
def translated(translate: Translate, attempt: Attempt) -> Iterator[None]:
    """Raise what ``translate`` makes of an exception of the block (chained to it); anything it does not
    classify passes unchanged. Works around ``await`` too: ``with translated(...): await call()``."""
    try:
        yield
    except Exception as error:
        delivery = translate(error, attempt)
        if delivery is None:
            raise
        raise delivery from error
