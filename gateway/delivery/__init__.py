"""Delivery: replies formatted per platform (``formatting``) and sent from the outbox
(``outbox``: send, edit, retry, fall back to plain text, defer), plus the tool-progress message
(``progress``) and the typing indicator (``typing_indicator``).
"""
