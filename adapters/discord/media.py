"""Downloading the files users attach on Discord, from Discord's CDN.

An attachment's ``url`` (in MESSAGE_CREATE) is on Discord's CDN, ``cdn.discordapp.com`` (its
media proxy ``media.discordapp.net`` serves images too). It needs no token: the URL carries its
own signature, valid for about a day, after which the CDN answers 404 (``gone``). Nothing else is
fetched: a URL on any other site than those two and the site of ``api_base_url`` (a proxy, or the
local emulator in tests) is refused without a request (:mod:`adapters.file_hosts`).

The download runs on an aiohttp session of the adapter's own, opened on the first download and
closed with the adapter: discord.py keeps its HTTP session private and replaces it with every
client the supervisor builds, so a download could lose it halfway.
"""

from __future__ import annotations

from typing import Final

import structlog

from adapters.contract import Attachment, MediaUnavailable
from adapters.download import DownloadSession, download
from adapters.file_hosts import FileHosts, host_of

log = structlog.get_logger(__name__)

DISCORD_CDN: Final = ("https://cdn.discordapp.com", "https://media.discordapp.net")


class AttachmentDownloads:
    def __init__(self, api_base_url: str | None) -> None:
        self.hosts = FileHosts.of(DISCORD_CDN, api_base_url)
        self._session = DownloadSession("Discord")

    async def fetch(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        """The attachment's bytes (see :meth:`adapters.contract.Adapter.fetch_media`)."""
        if attachment.size is not None and attachment.size > max_bytes:
            raise MediaUnavailable("too_large", f"Discord says the file is {attachment.size} bytes, over the limit "
                                                f"of {max_bytes}")  # fmt: skip
        url = attachment.url
        if not url:
            raise MediaUnavailable("gone", "Discord gave no address for this file")
        if not self.hosts.allows(url):
            log.warning("discord.media.refused", attachment=attachment.ref, host=host_of(url),
                        allowed=self.hosts.describe(), reason="the file's URL is not on Discord's CDN")  # fmt: skip
            raise MediaUnavailable("refused", f"the file's address is on {host_of(url)}, not on Discord's CDN "
                                              f"({self.hosts.describe()}), so it was not downloaded")  # fmt: skip
        return await download(self._session.get(), url, max_bytes=max_bytes, timeout=timeout)

    async def close(self) -> None:
        await self._session.close()
