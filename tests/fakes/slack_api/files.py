"""Files users share in the fake Slack: the file objects events carry, their downloads, and ``files.info``.

:meth:`Files.hosted` registers bytes and returns the file object a ``message`` (subtype
``file_share``) or ``app_mention`` event carries in ``files``, with ``url_private_download`` on the
fake's own site (``/files-pri/<team>-<id>/download/<name>``, as Slack's file host spells it). A
download needs the bot token as ``Authorization: Bearer``: without it (or with another token) the
answer is 403. :meth:`Files.external` is a file kept elsewhere (a Google Drive link), which Slack
gives no download address; :meth:`Files.connect_stub` is what an event carries for a file shared
from another organisation in a Slack Connect channel (only its id: ``files.info`` tells the rest).
``files`` (:class:`tests.fakes.served_files.ServedFiles`) makes downloads fail and records them.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from aiohttp import web

from tests.fakes.served_files import ServedFiles

_KINDS = {"image": "png", "audio": "m4a", "video": "mp4", "application/pdf": "pdf", "text": "text"}


class Files:
    def __init__(self, site: str, team_id: str, bot_token: str) -> None:
        self.site = site
        """The fake's own ``http://host:port``, known once it listens (set by the server)."""
        self._team = team_id
        self._token = bot_token
        self.served = ServedFiles()
        self.objects: dict[str, dict[str, Any]] = {}
        """Every file by id, as ``files.info`` describes it."""
        self._ids = itertools.count(1)

    def hosted(
        self,
        data: bytes,
        name: str,
        mimetype: str,
        *,
        user: str = "U0ALICE",
        size: int | None = None,
        width: int | None = None,
        height: int | None = None,
        duration_ms: int | None = None,
        subtype: str | None = None,
    ) -> dict[str, Any]:
        """Register ``data``; the file object for an event's ``files``. ``size`` overrides the claim (default:
        the real length); ``subtype="slack_audio"`` is a voice clip recorded in Slack."""
        file_id = f"F{next(self._ids):08d}"
        self.served.add(file_id, data)
        base = f"{self.site}/files-pri/{self._team}-{file_id}"
        item: dict[str, Any] = {
            "id": file_id, "created": int(time.time()), "timestamp": int(time.time()), "name": name, "title": name,
            "mimetype": mimetype, "filetype": _filetype(mimetype), "pretty_type": mimetype, "user": user,
            "user_team": self._team, "editable": False, "size": len(data) if size is None else size,
            "mode": "hosted", "is_external": False, "external_type": "", "is_public": False,
            "public_url_shared": False, "display_as_bot": False, "username": "",
            "url_private": f"{base}/{name}", "url_private_download": f"{base}/download/{name}",
            "permalink": f"https://fake.slack.test/files/{user}/{file_id}/{name}", "has_rich_preview": False,
            "file_access": "visible",
        }  # fmt: skip
        if width is not None and height is not None:
            item.update(original_w=width, original_h=height, thumb_360=f"{base}/thumb_360.png")
        if duration_ms is not None:
            item["duration_ms"] = duration_ms
        if subtype is not None:
            item.update(subtype=subtype, media_display_type="audio" if subtype == "slack_audio" else "video")
        self.objects[file_id] = item
        return dict(item)

    def external(self, name: str, url: str) -> dict[str, Any]:
        """A file kept outside Slack (``mode: external``): a link, with no ``url_private_download``."""
        file_id = f"F{next(self._ids):08d}"
        item = {
            "id": file_id, "created": int(time.time()), "name": name, "title": name,
            "mimetype": "application/vnd.google-apps.document", "filetype": "gdoc", "mode": "external",
            "is_external": True, "external_type": "gdrive", "url_private": url, "size": 0,
        }  # fmt: skip
        self.objects[file_id] = item
        return dict(item)

    def connect_stub(self, item: dict[str, Any]) -> dict[str, Any]:
        """What a Slack Connect channel's event carries for ``item`` shared from another organisation."""
        return {"id": item["id"], "mode": "file_access", "file_access": "check_file_info"}

    async def info(self, args: dict[str, Any], token: str | None) -> dict[str, Any]:
        """``files.info`` (needs the ``files:read`` scope, which the bot token has here)."""
        if token != self._token:
            return {"ok": False, "error": "invalid_auth"}
        item = self.objects.get(str(args.get("file") or ""))
        if item is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": dict(item), "comments": [], "response_metadata": {"next_cursor": ""}}

    async def download(self, request: web.Request) -> web.StreamResponse:
        """``GET /files-pri/<team>-<id>/...``: the file's bytes for the bot token, 403 for anyone else."""
        file_id = request.match_info["team_file"].rpartition("-")[2]
        authorized = request.headers.get("Authorization") == f"Bearer {self._token}"
        return await self.served.answer(request, file_id, authorized=authorized)


def _filetype(mimetype: str) -> str:
    return _KINDS.get(mimetype) or _KINDS.get(mimetype.partition("/")[0]) or "binary"
