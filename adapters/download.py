"""Downloading a file a user sent, for every adapter: bounded in size and time, never led to another host.

A platform hands us a URL (Discord's CDN, Slack's ``url_private_download``, Telegram's file path on
the Bot API server); :func:`download` reads it with the adapter's own aiohttp session and:

* stops as soon as more than ``max_bytes`` arrived (or the ``Content-Length`` says it will), so a
  file over the limit costs at most the limit in memory and bandwidth;
* gives up after ``timeout`` seconds in all (connect, redirects and body together);
* follows a redirect only to the same site, i.e. scheme, host and port (:func:`adapters.file_hosts.site_of`,
  at most three): a URL that sends us elsewhere (a login page, a tracker, an internal address) is
  refused, not fetched;
* says what went wrong as :class:`MediaUnavailable` with a reason (``too_large``, ``timeout``,
  ``redirect``, ``gone``, ``refused``, ``failed``).

:class:`DownloadSession` is the aiohttp session an adapter downloads on when it has none of its own
to lend (Telegram's and Discord's libraries keep theirs private).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final
from urllib.parse import urljoin

import aiohttp

from adapters.contract import MediaUnavailable
from adapters.file_hosts import site_of

MAX_REDIRECTS: Final = 3
_CHUNK: Final = 64 * 1024


async def download(
    session: aiohttp.ClientSession,
    url: str,
    *,
    max_bytes: int,
    timeout: float,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The body at ``url``, at most ``max_bytes`` long (see the module's docstring)."""
    try:
        async with asyncio.timeout(timeout):
            return await _follow(session, url, max_bytes=max_bytes, headers=dict(headers or {}))
    except TimeoutError:
        raise MediaUnavailable("timeout", f"the download took longer than {timeout:g} s") from None
    except aiohttp.ClientError as error:
        raise MediaUnavailable("failed", f"the download failed ({type(error).__name__})") from error


async def _follow(session: aiohttp.ClientSession, url: str, *, max_bytes: int, headers: dict[str, str]) -> bytes:
    origin = site_of(url)
    for _ in range(MAX_REDIRECTS + 1):
        async with session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status in (301, 302, 303, 307, 308):
                target = urljoin(url, response.headers.get("Location", ""))
                if site_of(target) != origin:
                    raise MediaUnavailable("redirect", "the file's address sent us to another site, which is not followed")
                url = target
                continue
            _check_status(response.status)
            if response.content_length is not None and response.content_length > max_bytes:
                raise MediaUnavailable("too_large", f"the file is {response.content_length} bytes, over {max_bytes}")
            return await _read_capped(response, max_bytes)
    raise MediaUnavailable("redirect", f"the file's address redirected more than {MAX_REDIRECTS} times")


def _check_status(status: int) -> None:
    if status in (404, 410):
        raise MediaUnavailable("gone", "the platform no longer has the file")
    if status in (401, 403):
        raise MediaUnavailable("refused", f"the platform refused the download (HTTP {status}); check the bot's permissions")
    if status >= 400:
        raise MediaUnavailable("failed", f"the platform answered HTTP {status} to the download")


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    body = bytearray()
    async for piece in response.content.iter_chunked(_CHUNK):
        body += piece
        if len(body) > max_bytes:
            raise MediaUnavailable("too_large", f"the file is over {max_bytes} bytes")
    return bytes(body)



class DownloadSession:
    """An adapter's own aiohttp session for downloads: opened on the first one, closed with the adapter,
    after which a download is refused. No total timeout of its own (each download has one) and no
    cookies (file servers need none)."""

    def __init__(self, platform: str) -> None:
        self._platform = platform
        self._http: aiohttp.ClientSession | None = None
        self._closed = False

    def get(self) -> aiohttp.ClientSession:
        if self._closed:
            raise MediaUnavailable("failed", f"the {self._platform} adapter has stopped, so the file cannot be "
                                             "downloaded")  # fmt: skip
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                               cookie_jar=aiohttp.DummyCookieJar())  # fmt: skip
        return self._http

    async def close(self) -> None:
        """Close the session; later downloads are refused. Idempotent."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.close()
