"""The gateway's media, set up from the ``media:`` section: the home's media folder, the pipeline that
reads the files users send (with the transcriber when ``media.transcription`` is set), and keeping
the folder to ``media.retention_days``.

The folder is ``<home>/media`` (``LoadedConfig.media_dir``): the pipeline keeps files there, and the
agent reads them back by name (the folder is the agent's :class:`agent.MediaSource`, given to it by
``gateway/agent_factory.py``).
"""

from __future__ import annotations

import structlog

from config.loader import LoadedConfig
from gateway.media.pipeline import MediaPipeline
from gateway.media.transcribe import Transcriber
from storage import MediaFolder

log = structlog.get_logger("gateway.media")

DAY = 24 * 3600.0


class GatewayMedia:
    """The media a gateway runs with: the folder, the pipeline, and the transcriber to close at the end."""

    def __init__(self, loaded: LoadedConfig) -> None:
        config = loaded.settings.media
        self.folder = MediaFolder(loaded.media_dir)
        self.transcriber = Transcriber(config.transcription) if config.transcription is not None else None
        self.pipeline = MediaPipeline(config, self.folder, self.transcriber)
        self._retention_days = config.retention_days

    async def prune(self) -> None:
        """Remove the files older than ``media.retention_days`` (0 keeps them): older turns then show a stand-in."""
        if self._retention_days <= 0:
            return
        try:
            files, size = await self.folder.prune(self._retention_days * DAY)
        except OSError as error:  # a folder that cannot be read: said, and tried again at the next hour
            log.warning("media.prune_failed", error=str(error), hint=f"check the permissions of {self.folder.root}")
            return
        if files:
            log.info("media.pruned", files=files, bytes=size, retention_days=self._retention_days)

    async def aclose(self) -> None:
        if self.transcriber is not None:
            await self.transcriber.aclose()
