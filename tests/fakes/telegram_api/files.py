"""The files half of the fake Telegram: files users sent, ``getFile``, and the download URL.

A test registers the bytes of a file with :meth:`FileSide.add_file` and gets the
``file_id`` Telegram would hand out; a message carrying that id (see :mod:`.media`)
reaches the bot, which asks ``getFile`` for the file's path and size and then downloads
``GET /file/bot<token>/<file_path>``, as from the cloud Bot API.

A file can be made to misbehave (:class:`Fault`): ``getFile`` refuses it as Telegram does
(over the cloud API's 20 MB, or no longer available), or its download answers 404, never
answers, redirects to another host or within this one, promises more bytes than it sends,
or sends them with no length at all. What the bot fetched is recorded in
:attr:`FileSide.file_requests` (paths under ``/file/``, without the token) and
:attr:`FileSide.elsewhere_requests` (what reached the "other host" a redirect points to).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiohttp import web

from .users import UserSide
from .wire import error, ok

TOO_BIG = "Bad Request: file is too big"
"""What the cloud Bot API answers ``getFile`` for a file over its 20 MB download limit."""
UNAVAILABLE = "Bad Request: wrong file_id or the file is temporarily unavailable"
INVALID = "Bad Request: invalid file_id"


class Fault(StrEnum):
    """How a registered file misbehaves."""

    TOO_BIG = "too_big"
    """``getFile`` answers 400 "file is too big" (the cloud Bot API's 20 MB limit)."""
    UNAVAILABLE = "unavailable"
    """``getFile`` answers 400 "wrong file_id or the file is temporarily unavailable"."""
    MISSING = "missing"
    """The download answers 404, as for an expired file path."""
    HANG = "hang"
    """The download never answers (until the emulator stops or the client gives up)."""
    REDIRECT = "redirect"
    """The download redirects to the same path on another host (``localhost`` for ``127.0.0.1``)."""
    MOVED = "moved"
    """The download redirects to another path on this same host, which serves the bytes."""
    SHORT = "short"
    """The download announces more bytes than it sends, then closes the connection."""
    UNSIZED = "unsized"
    """The download sends the bytes chunked, with no Content-Length."""


@dataclass(frozen=True, slots=True)
class StoredFile:
    file_id: str
    unique_id: str
    data: bytes
    path: str
    """The ``file_path`` getFile answers, relative to ``/file/bot<token>/``."""
    size: int | None
    """The size Telegram claims (getFile's ``file_size`` and the message's); None: none is said."""
    fault: Fault | None


class FileSide(UserSide):
    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, StoredFile] = {}
        self.file_requests: list[str] = []
        """Every download asked for: the file path after ``/file/bot<token>/``, in order."""
        self.elsewhere_requests: list[str] = []
        """Every request that reached the other host a :attr:`Fault.REDIRECT` sent the client to."""
        self._file_numbers = itertools.count(1)
        self._hung = asyncio.Event()
        self.host: str
        self.port: int
        self.token: str

    def add_file(
        self, data: bytes, *, folder: str = "documents", suffix: str = "", size: int | None = -1,
        fault: Fault | None = None,
    ) -> str:  # fmt: skip
        """Keep ``data`` as a file Telegram has; returns its ``file_id``.

        ``folder`` and ``suffix`` shape its path (``photos/file_3.jpg``); ``size`` is the size Telegram
        claims for it (default: the true one; None: no size is claimed).
        """
        number = next(self._file_numbers)
        stored = StoredFile(
            file_id=f"file-{number}-{folder}", unique_id=f"unique-{number}", data=data,
            path=f"{folder}/file_{number}{suffix}", size=len(data) if size == -1 else size, fault=fault,
        )  # fmt: skip
        self.files[stored.file_id] = stored
        return stored.file_id

    def file_json(self, file_id: str, **fields: Any) -> dict[str, Any]:
        """A file's fields as a message carries them (``file_id``, ``file_unique_id``, ``file_size``) plus ``fields``."""
        stored = self.files[file_id]
        data: dict[str, Any] = {"file_id": stored.file_id, "file_unique_id": stored.unique_id, **fields}
        if stored.size is not None:
            data["file_size"] = stored.size
        return data

    def file_url(self, file_id: str) -> str:
        """Where the bot downloads the file (the URL holds the token, as Telegram's does)."""
        return f"{self.base_url}/file/bot{self.token}/{self.files[file_id].path}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_file_routes(self, app: web.Application) -> None:
        app.router.add_get("/file/bot{token}/{path:.+}", self._serve_file)
        app.router.add_get("/_test/elsewhere/{path:.+}", self._serve_elsewhere)

    def release_hung_downloads(self) -> None:
        """End every download held by :attr:`Fault.HANG` (the emulator does this when it stops)."""
        self._hung.set()

    # --- the Bot API -------------------------------------------------------------------------
    async def _api_getfile(self, params: dict[str, Any]) -> web.Response:
        stored = self.files.get(str(params.get("file_id") or ""))
        if stored is None:
            return error(400, INVALID)
        if stored.fault is Fault.TOO_BIG:
            return error(400, TOO_BIG)
        if stored.fault is Fault.UNAVAILABLE:
            return error(400, UNAVAILABLE)
        answer: dict[str, Any] = {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "file_path": stored.path}
        if stored.size is not None:
            answer["file_size"] = stored.size
        return ok(answer)

    # --- downloads ---------------------------------------------------------------------------
    async def _serve_file(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        async with self.changed:
            self.file_requests.append(path)
            self.changed.notify_all()
        stored = next((f for f in self.files.values() if f.path == path), None)
        moved = path.startswith("moved/")
        if moved:
            stored = next((f for f in self.files.values() if f.path == path.removeprefix("moved/")), None)
        if request.match_info["token"] != self.token or stored is None or stored.fault is Fault.MISSING:
            return error(404, "Not Found")
        if stored.fault is Fault.HANG:
            await self._hung.wait()
            return error(504, "Gateway Timeout")
        if stored.fault is Fault.REDIRECT:
            other = "localhost" if self.host != "localhost" else "127.0.0.1"
            raise web.HTTPFound(f"http://{other}:{self.port}/_test/elsewhere/{path}")
        if stored.fault is Fault.MOVED and not moved:
            raise web.HTTPFound(f"/file/bot{self.token}/moved/{path}")
        return await _send(request, stored)

    async def _serve_elsewhere(self, request: web.Request) -> web.Response:
        async with self.changed:
            self.elsewhere_requests.append(request.match_info["path"])
            self.changed.notify_all()
        return web.Response(body=b"not the file you asked for", content_type="application/octet-stream")


async def _send(request: web.Request, stored: StoredFile) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    if stored.fault is Fault.UNSIZED:
        response.enable_chunked_encoding()
    else:
        response.content_length = len(stored.data) + (1024 if stored.fault is Fault.SHORT else 0)
    if stored.fault is Fault.SHORT:
        response.force_close()  # the connection ends with the body still short of its announced length
    await response.prepare(request)
    for start in range(0, len(stored.data), 64 * 1024):
        await response.write(stored.data[start : start + 64 * 1024])
    if stored.fault is not Fault.SHORT:
        await response.write_eof()
    return response
