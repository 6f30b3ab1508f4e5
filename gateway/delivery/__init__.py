"""Delivery: replies formatted per platform (``formatting``) and sent from the outbox
(``outbox``: send, edit, retry, fall back to plain text, defer; ``policy``: retries and a chunk's
nonce), plus the tool-progress message
(``progress``) and the typing indicator (``typing_indicator``).
"""
