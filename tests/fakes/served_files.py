"""Files an emulated platform hands out for download, and the ways a test makes a download go wrong.

A platform emulator keeps one :class:`ServedFiles`: a test registers bytes under a key (the
platform's file or attachment id), the emulator puts a URL for it into the events it sends, and
its route for that URL answers through :meth:`ServedFiles.answer`. Each download is recorded
(path and headers, so a test can check which credentials came with it). A test can make a file's
download fail: :meth:`ServedFiles.missing` (404), :meth:`ServedFiles.hang` (no answer until the
emulator stops), :meth:`ServedFiles.redirect` (a 302 to another address, such as
:class:`tests.fakes.other_site.OtherSite`) and :meth:`ServedFiles.cut_short` (the body ends
before its ``Content-Length``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

Trouble = Literal["missing", "hang", "redirect", "cut_short"]


@dataclass(frozen=True, slots=True)
class Download:
    """One request for a served file, as it arrived."""

    key: str
    path: str
    headers: dict[str, str]


@dataclass(slots=True)
class ServedFile:
    data: bytes
    trouble: Trouble | None = None
    location: str = ""
    """Where a ``redirect`` sends the client."""


class ServedFiles:
    def __init__(self) -> None:
        self.files: dict[str, ServedFile] = {}
        self.downloads: list[Download] = []
        self._stopping = asyncio.Event()

    def add(self, key: str, data: bytes) -> None:
        self.files[key] = ServedFile(data)

    def missing(self, key: str) -> None:
        """The file's download answers 404 (deleted, or an expired address)."""
        self.files[key].trouble = "missing"

    def hang(self, key: str) -> None:
        """The file's download never answers (until :meth:`release`)."""
        self.files[key].trouble = "hang"

    def redirect(self, key: str, location: str) -> None:
        """The file's download answers 302 to ``location``."""
        self.files[key].trouble, self.files[key].location = "redirect", location

    def cut_short(self, key: str) -> None:
        """The file's download promises the whole file and sends only half of it before closing."""
        self.files[key].trouble = "cut_short"

    def downloads_of(self, key: str) -> list[Download]:
        return [download for download in self.downloads if download.key == key]

    def release(self) -> None:
        """Let every hanging download end (the emulator is stopping or reset)."""
        self._stopping.set()
        self._stopping = asyncio.Event()

    async def answer(self, request: web.Request, key: str, *, authorized: bool = True) -> web.StreamResponse:
        """The response to a download of ``key``: 403 when not ``authorized`` (the platform's check of the
        request's credentials), 404 for a key never added."""
        self.downloads.append(Download(key, request.path, dict(request.headers)))
        if not authorized:
            return web.Response(status=403, text="403: not allowed to read this file")
        served = self.files.get(key)
        if served is None or served.trouble == "missing":
            return web.Response(status=404, text="404: Not Found")
        if served.trouble == "hang":
            await self._stopping.wait()
            return web.Response(status=503, text="the emulator is stopping")
        if served.trouble == "redirect":
            raise web.HTTPFound(served.location)
        if served.trouble == "cut_short":
            return await _cut_short(request, served.data)
        return web.Response(body=served.data, content_type="application/octet-stream")


async def _cut_short(request: web.Request, data: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.content_length = len(data)
    await response.prepare(request)
    await response.write(data[: len(data) // 2])
    assert request.transport is not None
    request.transport.close()
    return response
