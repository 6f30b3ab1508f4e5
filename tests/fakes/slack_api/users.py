"""The fake workspace's people, for ``users.info``.

A test adds users with :meth:`Directory.add`; an id nobody added answers
``user_not_found`` as Slack does. Setting :attr:`Directory.scope_granted` to
False makes every call answer ``missing_scope`` (an app installed without
``users:read``), and :attr:`Directory.hold` (an event) keeps answers back
until it is set, for a slow Slack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any


class Directory:
    def __init__(self) -> None:
        self._users: dict[str, dict[str, Any]] = {}
        self.scope_granted = True
        self.hold: asyncio.Event | None = None

    def add(self, user_id: str, name: str, *, real_name: str = "", display_name: str = "") -> None:
        """A member of the workspace: account ``name``, profile ``real_name`` and ``display_name``."""
        self._users[user_id] = {
            "id": user_id, "name": name, "real_name": real_name, "deleted": False, "is_bot": False,
            "profile": {"real_name": real_name, "display_name": display_name,
                        "real_name_normalized": real_name, "display_name_normalized": display_name},
        }  # fmt: skip

    async def info(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if self.hold is not None:
            await self.hold.wait()
        if not self.scope_granted:
            return {"ok": False, "error": "missing_scope", "needed": "users:read", "provided": "chat:write"}
        user = self._users.get(str(args.get("user") or ""))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}
