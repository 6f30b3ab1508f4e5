"""The pictures tools return, kept for the model as users' photos are: checked, downscaled, in the media folder.

The agent hands each picture a tool returned to :class:`ToolPictures` (its :class:`agent.MediaSink`).
It goes through the same :func:`gateway.media.images.prepare_image` as a photo a user sends (a
decompression bomb or a damaged file refused, upright, scaled to what the provider reads, metadata
dropped, encoded anew) and is kept in the home's media folder by its SHA-256, so the tool's message
refers to it like any other part, it is pruned after ``media.retention_days`` like the rest, and a
picture that cannot be used costs that picture only (the agent puts a line in the result instead).
"""

from __future__ import annotations

import asyncio

from agent import KeptImage
from gateway.media.errors import MediaRejected
from gateway.media.images import prepare_image
from storage import MediaFolder


class ToolPictures:
    """Keeps the pictures tools return in ``folder``, downscaled as the media pipeline does a user's photo."""

    def __init__(self, folder: MediaFolder, *, max_pixels: int) -> None:
        """``max_pixels``: the most a picture may claim before it is refused (``media.limits.image_megapixels``)."""
        self._folder = folder
        self._max_pixels = max_pixels

    async def keep_image(self, data: bytes, mime: str) -> KeptImage:
        """The picture made ready and kept; ``ValueError`` saying why when it cannot be."""
        try:
            image = await asyncio.to_thread(prepare_image, data, max_pixels=self._max_pixels)
        except MediaRejected as rejected:
            raise ValueError(rejected.user_text) from rejected
        sha256 = await self._folder.put(image.data)
        return KeptImage(sha256=sha256, mime=image.mime, size=len(image.data), width=image.width, height=image.height)
