"""Reading Telegram's updates one at a time, so one that cannot be read never holds up the others.

aiogram validates a whole ``getUpdates`` answer at once: one update with a
field of an unexpected type (the Bot API changed, or something in between did)
fails the batch, and since the offset cannot move past an update that was never
read, polling would fetch the same failing batch forever. :class:`RawGetUpdates`
asks for the same method through the same ``Bot`` (its API base, session and
error handling) but leaves the result as JSON objects, and :func:`read_update`
validates and converts each one on its own, the same way for a webhook's POST.
An update that cannot be read is logged as ``telegram.update.rejected`` with its
id and the reason (never its content) and reported as nothing to store, so the
caller confirms it to Telegram and goes on.
"""

from __future__ import annotations

from typing import Any

import structlog
from aiogram import Bot
from aiogram.methods import GetUpdates
from aiogram.types import Update

from adapters.contract import InboundMessage, log_rejected

from .convert import BotIdentity, to_inbound

log = structlog.get_logger(__name__)


class RawGetUpdates(GetUpdates):
    """``getUpdates`` whose result is the list of updates as Telegram sent them, each still a JSON object."""

    __returning__ = list[Any]


def update_id_of(raw: object) -> int | None:
    """The ``update_id`` of a raw update, or None when it has none that is a number."""
    value = raw.get("update_id") if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_update(raw: object, bot: Bot, identity: BotIdentity) -> InboundMessage | None:
    """The message one raw update carries, or None when there is nothing to store.

    None means either an update the gateway does not answer (an edit, a service
    message, a kind it did not ask for) or one that cannot be read, which is
    logged as ``telegram.update.rejected``. Either way Telegram may be told it is done.
    """
    try:
        return to_inbound(Update.model_validate(raw, context={"bot": bot}), identity)
    except Exception as error:  # noqa: BLE001 - one unreadable update must not block the ones after it
        log_rejected(log, "telegram.update.rejected", error, update_id=update_id_of(raw))
        return None
