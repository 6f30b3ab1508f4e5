"""Telegram on aiogram 3: long polling or webhook in, Telegram HTML out.

Modules: :mod:`.adapter` (lifecycle and the gateway-facing API), :mod:`.convert`
(update to inbound message), :mod:`.polling` (getUpdates loop and watchdog),
:mod:`.webhook` (the HTTP endpoint), :mod:`.webhook_watch` (getWebhookInfo
checks: a lost registration, failing delivery), :mod:`.sending` (sends, edits,
typing and error translation), :mod:`.downloads` (files users sent: getFile and
the file URL), :mod:`.probe` (the doctor's token check).
"""

__all__ = ("TelegramAdapter", "TelegramSettings")


def __getattr__(name: str) -> object:
    # Imported on first use, so the doctor's token check (``probe.py``) does not load aiogram.
    if name in __all__:
        from adapters.telegram import adapter

        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
