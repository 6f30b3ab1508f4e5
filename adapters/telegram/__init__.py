"""Telegram on aiogram 3: long polling or webhook in, Telegram HTML out.

Modules: :mod:`.adapter` (lifecycle and the gateway-facing API), :mod:`.convert`
(update to inbound message), :mod:`.polling` (getUpdates loop and watchdog),
:mod:`.webhook` (the HTTP endpoint), :mod:`.webhook_watch` (getWebhookInfo
checks: a lost registration, failing delivery), :mod:`.sending` (sends, edits,
typing and error translation).
"""

from .adapter import TelegramAdapter, TelegramSettings

__all__ = ("TelegramAdapter", "TelegramSettings")
