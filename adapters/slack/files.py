"""Downloading the files users share on Slack: with the bot token, and to Slack's file host only.

A file in a ``message`` (``file_share``) or ``app_mention`` event names its
``url_private_download`` on ``files.slack.com``; reading it takes the bot token
(``Authorization: Bearer xoxb-…``) and the ``files:read`` scope. The token goes nowhere else: a
URL on any site but Slack's file host and the site of ``api_base_url`` (the local fake in tests) is
refused before a request is made (:mod:`adapters.file_hosts`), and a redirect to another site is
not followed (:func:`adapters.download.download`). The download runs on the adapter's own aiohttp
session, the one its Web API client uses.

Where Slack tells no address:

* a file shared from another organisation in a Slack Connect channel arrives as its id alone
  (``file_access: check_file_info``): ``files.info`` (the same scope) tells its address and size,
  then the size claim and the download are checked as for any other file;
* a file kept outside Slack (a Google Drive link, ``mode: external``) has no download address at
  all: ``unsupported``, saying so.

Without ``files:read`` Slack sends a download to its sign-in page (another site): that refusal
names the scope, so the operator knows what to add.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import Attachment, MediaUnavailable
from adapters.download import download
from adapters.file_hosts import FileHosts, host_of
from adapters.slack.sending import error_code

log = structlog.get_logger(__name__)

SLACK_FILE_HOST: Final = "https://files.slack.com"
SCOPE_HINT: Final = "add the files:read scope to the Slack app and reinstall it"
_GONE: Final = frozenset({"file_not_found", "file_deleted"})


class FileDownloads:
    def __init__(
        self, client: AsyncWebClient, session: Callable[[], aiohttp.ClientSession | None], api_base_url: str | None
    ) -> None:
        self.hosts = FileHosts.of((SLACK_FILE_HOST,), api_base_url)
        self._client = client
        self._session = session

    async def fetch(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        """The file's bytes (see :meth:`adapters.contract.Adapter.fetch_media`)."""
        session = self._session()
        if session is None or session.closed:
            raise MediaUnavailable("failed", "the Slack adapter is not connected, so the file cannot be downloaded")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        url, size = attachment.url, attachment.size
        _check_claim(size, max_bytes)
        if url is None:
            url, size = await self._look_up(attachment.ref, timeout)
            _check_claim(size, max_bytes)
        if not self.hosts.allows(url):
            where = f"the file's address is on {host_of(url)}, not on Slack's file host ({self.hosts.describe()})"
            log.warning("slack.file.refused", file=attachment.ref, reason=where + "; the bot token is not sent there")
            raise MediaUnavailable("refused", where + "; the bot token is not sent there, so it was not downloaded")
        headers = {"Authorization": f"Bearer {self._client.token}"}
        try:
            return await download(session, url, max_bytes=max_bytes, timeout=max(deadline - loop.time(), 0.0),
                                  headers=headers)  # fmt: skip
        except MediaUnavailable as error:
            if error.reason not in ("redirect", "refused"):
                raise
            raise MediaUnavailable(error.reason, f"{error}; Slack does this when the app may not read files: "
                                                 f"{SCOPE_HINT}") from error  # fmt: skip

    async def _look_up(self, file_id: str | None, timeout: float) -> tuple[str, int | None]:
        """The download address and size ``files.info`` gives for a file the event named by id only."""
        if not file_id:
            raise MediaUnavailable("unsupported", "Slack gave neither an address nor an id for this file")
        try:
            async with asyncio.timeout(timeout):
                response = await self._client.files_info(file=file_id)
        except TimeoutError:
            raise MediaUnavailable("timeout", f"Slack's files.info took longer than {timeout:g} s") from None
        except SlackApiError as error:
            raise _lookup_error(error_code(error.response)) from error
        except (SlackClientError, aiohttp.ClientError) as error:
            raise MediaUnavailable("failed", f"asking Slack about the file failed ({type(error).__name__})") from error
        found = response.get("file")
        item: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        url = item.get("url_private_download")
        if not isinstance(url, str) or not url:
            raise MediaUnavailable("unsupported", "the file is kept outside Slack (a link to another service, such as "
                                                  "Google Drive), so Slack has no copy to download")  # fmt: skip
        size = item.get("size")
        return url, size if isinstance(size, int) and not isinstance(size, bool) else None


def _check_claim(size: int | None, max_bytes: int) -> None:
    if size is not None and size > max_bytes:
        raise MediaUnavailable("too_large", f"Slack says the file is {size} bytes, over the limit of {max_bytes}")


def _lookup_error(code: str) -> MediaUnavailable:
    if code in _GONE:
        return MediaUnavailable("gone", f"Slack no longer has the file ({code})")
    if code == "missing_scope":
        return MediaUnavailable("refused", f"Slack refused files.info (missing_scope); {SCOPE_HINT}")
    return MediaUnavailable("failed", f"Slack's files.info failed: {code or 'no reason given'}")
