"""Downloading a file a user sent, for every adapter: bounded in size and time, never led to another host.

A platform hands us a URL (Discord's CDN, Slack's ``url_private_download``, Telegram's file path on
the Bot API server); :func:`download` reads it with the adapter's own aiohttp session and:

* stops as soon as more than ``max_bytes`` arrived (or the ``Content-Length`` says it will), so a
  file over the limit costs at most the limit in memory and bandwidth;
* gives up after ``timeout`` seconds in all (connect, redirects and body together);
* follows a redirect only to the same scheme, host and port (at most three): a URL that sends us
  elsewhere (a login page, a tracker, an internal address) is refused, not fetched;
* says what went wrong as :class:`MediaUnavailable` with a reason (``too_large``, ``timeout``,
  ``redirect``, ``gone``, ``refused``, ``failed``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final
from urllib.parse import urljoin, urlsplit

import aiohttp

from adapters.contract import MediaUnavailable

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
    origin = _origin(url)
    for _ in range(MAX_REDIRECTS + 1):
        async with session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status in (301, 302, 303, 307, 308):
                target = urljoin(url, response.headers.get("Location", ""))
                if _origin(target) != origin:
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


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
