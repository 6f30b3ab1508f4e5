"""Why a file a user sent cannot be used: one exception, with a reason for logs and words for the user."""

from __future__ import annotations


class MediaRejected(Exception):
    """A file that cannot be used as it is.

    ``reason`` is one word for logs and metrics (``too_large``, ``too_long``, ``too_many_pages``,
    ``unsupported``, ``corrupt``, ``bomb``, ``encrypted``, ``download_failed``, ``no_transcription``,
    ``transcription_failed``, ``disabled``); ``user_text`` is one short sentence the user is shown
    ("it is 34 MB and the limit for documents is 20 MB"), without the file's name (the caller adds it).
    """

    def __init__(self, reason: str, user_text: str) -> None:
        super().__init__(f"{reason}: {user_text}")
        self.reason = reason
        self.user_text = user_text
