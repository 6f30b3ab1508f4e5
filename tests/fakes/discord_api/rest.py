"""The REST half of the emulator: the endpoints discord.py calls to log in, send, edit and type, and to read a
channel (``GET /channels/{id}``) and its history (``GET /channels/{id}/messages`` with ``before`` / ``after`` /
``limit``, newest first as Discord answers). Messages carry ``components`` (action rows of buttons), checked
as Discord checks them; an edit sets or (with an empty list) removes them. A press of a button is answered on
``POST /interactions/{id}/{token}/callback`` (no bot token: the interaction's own token authorizes it), which
records the body in :attr:`World.interactions` and refuses a second answer as Discord does.

Every JSON answer carries ``Content-Type: application/json`` exactly: discord.py
only parses a body as JSON when the header is exactly that (aiohttp's
``json_response`` adds ``; charset=utf-8``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import payloads
from tests.fakes.discord_api.world import Edit, Interaction, World

API = "/api/v10"


def reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response with the exact content type discord.py expects."""
    response = web.Response(body=json.dumps(data).encode(), status=status, headers=headers or {})
    response.headers["Content-Type"] = "application/json"
    return response


def error(status: int, message: str, code: int = 0) -> web.Response:
    return reply({"message": message, "code": code}, status)


class RestApi:
    def __init__(self, world: World, gateway_url: str) -> None:
        self.world = world
        self.gateway_url = gateway_url

    def add_routes(self, app: web.Application) -> None:
        app.middlewares.append(self._record_and_authorize)
        app.middlewares.append(self._rate_limit)
        app.router.add_get(f"{API}/users/@me", self._me)
        app.router.add_get(f"{API}/oauth2/applications/@me", self._application)
        app.router.add_get(f"{API}/gateway", self._gateway)
        app.router.add_get(f"{API}/gateway/bot", self._gateway_bot)
        app.router.add_post(f"{API}/users/@me/channels", self._open_dm)
        app.router.add_get(f"{API}/channels/{{channel}}", self._channel)
        app.router.add_get(f"{API}/channels/{{channel}}/messages", self._history)
        app.router.add_post(f"{API}/channels/{{channel}}/messages", self._create_message)
        app.router.add_patch(f"{API}/channels/{{channel}}/messages/{{message}}", self._edit_message)
        app.router.add_post(f"{API}/channels/{{channel}}/typing", self._typing)
        app.router.add_post(f"{API}/interactions/{{interaction}}/{{token}}/callback", self._interaction_callback)

    @web.middleware
    async def _record_and_authorize(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.startswith(API):
            return await handler(request)
        self.world.rest_calls.append((request.method, request.path.removeprefix(API)))
        public = request.path == f"{API}/gateway" or request.path.startswith(f"{API}/interactions/")
        if not public and request.headers.get("Authorization") != f"Bot {self.world.token}":
            return error(401, "401: Unauthorized")
        return await handler(request)

    async def _me(self, _: web.Request) -> web.Response:
        if self.world.login_failures > 0:
            self.world.login_failures -= 1
            return error(503, "upstream connect error")
        return reply({**self.world.bot, "verified": True, "mfa_enabled": False, "locale": "en-US"})

    async def _application(self, _: web.Request) -> web.Response:
        return reply(payloads.application(self.world.app_id, self.world.bot))

    async def _gateway(self, _: web.Request) -> web.Response:
        return reply({"url": self.gateway_url})

    async def _gateway_bot(self, _: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return reply({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _open_dm(self, request: web.Request) -> web.Response:
        body = await request.json()
        recipient = str(body["recipient_id"])
        channel_id = self.world.dm_channel_for(recipient)
        return reply(payloads.dm_channel(channel_id, self.world.user(recipient)))

    @web.middleware
    async def _rate_limit(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Creates and edits of messages count against their channel's limit when it is enforced; every
        such answer then carries the limit's headers, and one beyond it is a 429."""
        limits, channel_id = self.world.limits, request.match_info.get("channel")
        creates_or_edits = (request.method == "POST" and request.path.endswith("/messages")) or (
            request.method == "PATCH" and "message" in request.match_info
        )
        if limits is None or channel_id is None or not creates_or_edits:
            response = await handler(request)
        else:
            verdict = limits.take(channel_id)
            response = await handler(request) if verdict.allowed else reply(verdict.refusal(), 429)
            response.headers.update(verdict.headers)
        if response.status == 429:
            self.world.rate_limited += 1
        return response

    async def _channel(self, request: web.Request) -> web.Response:
        found = self.world.channel(request.match_info["channel"])
        return reply(found) if found is not None else error(404, "Unknown Channel", 10003)

    async def _history(self, request: web.Request) -> web.Response:
        """Up to ``limit`` (1-100, default 50) messages of the channel: the newest ones, those just before
        ``before``, or the oldest ones after ``after``; always newest first."""
        channel_id = request.match_info["channel"]
        if self.world.channel(channel_id) is None:
            return error(404, "Unknown Channel", 10003)
        try:
            limit = int(request.query.get("limit", "50"))
            before, after = (int(request.query[key]) if key in request.query else None for key in ("before", "after"))
        except ValueError:
            return error(400, "Invalid Form Body", 50035)
        if not 1 <= limit <= 100:
            return error(400, "Invalid Form Body", 50035)
        ids = sorted(int(key) for key, data in self.world.messages.items() if data["channel_id"] == channel_id)
        if before is not None:
            ids = [one for one in ids if one < before][-limit:]
        elif after is not None:
            ids = [one for one in ids if one > after][:limit]
        else:
            ids = ids[-limit:]
        return reply([self.world.messages[str(one)] for one in reversed(ids)])

    async def _create_message(self, request: web.Request) -> web.Response:
        failure = self.world.take_failure()
        if failure is not None and not failure.answer_lost:
            return reply(failure.body, failure.status, failure.headers)
        channel_id = request.match_info["channel"]
        body = await request.json()
        if not (body.get("content") or "").strip():
            return error(400, "Cannot send an empty message", 50006)
        if len(body["content"]) > 2000:
            return reply({"message": "Invalid Form Body", "code": 50035,
                          "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
                                                              "message": "Must be 2000 or fewer in length."}]}}},
                         400)  # fmt: skip
        if (refused := _components_refused(body)) is not None:
            return refused
        sent, _ = self.world.create(channel_id, body)
        await self.world.notify(lambda: None)
        if failure is not None:  # the message exists now; its answer never reaches the bot
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return reply(self.world.messages[sent.id])

    async def _edit_message(self, request: web.Request) -> web.Response:
        channel_id, message_id = request.match_info["channel"], request.match_info["message"]
        stored = self.world.messages.get(message_id)
        if stored is None or stored["channel_id"] != channel_id:
            return error(404, "Unknown Message", 10008)
        if stored["author"]["id"] != self.world.bot["id"]:
            return error(403, "Cannot edit a message authored by another user", 50005)
        body = await request.json()
        if (refused := _components_refused(body)) is not None:
            return refused
        stored.update(content=body.get("content", stored["content"]), edited_timestamp=payloads.now_iso())
        components = None
        if body.get("components") is not None:
            components = tuple(body["components"])
            stored["components"] = list(components)
        edit = Edit(channel_id, message_id, stored["content"], time.monotonic(), components)
        await self.world.notify(lambda: self.world.edits.append(edit))
        return reply(stored)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        """Discord's answer to a press: the interaction must exist, the token match, and no answer came before."""
        found = self.world.interactions.get(request.match_info["interaction"])
        if found is None or found.token != request.match_info["token"]:
            return error(404, "Unknown interaction", 10062)
        if found.callbacks:
            return error(400, "Interaction has already been acknowledged.", 40060)
        body = await request.json()
        if body.get("type") not in (4, 5, 6, 7):
            return reply({"message": "Invalid Form Body", "code": 50035,
                          "errors": {"type": {"_errors": [{"code": "BASE_TYPE_CHOICES"}]}}}, 400)  # fmt: skip
        await self.world.notify(lambda: found.callbacks.append(body))
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        return reply(_callback_response(found, body))

    async def _typing(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        await self.world.notify(lambda: self.world.typing.append(channel_id))
        return web.Response(status=204)


def _components_refused(body: dict[str, Any]) -> web.Response | None:
    """400 for components Discord would refuse; None when there are none or they are fine."""
    if body.get("components") is None:
        return None
    problem = payloads.components_problem(body["components"])
    if problem is None:
        return None
    return reply({"message": "Invalid Form Body", "code": 50035,
                  "errors": {"components": {"_errors": [{"code": "COMPONENT_INVALID", "message": problem}]}}},
                 400)  # fmt: skip


def _callback_response(found: Interaction, body: dict[str, Any]) -> dict[str, Any]:
    """What Discord answers a callback sent ``with_response``: the interaction, and the kind of answer it took."""
    return {
        "interaction": {"id": found.id, "type": payloads.INTERACTION_COMPONENT, "response_message_loading": False,
                        "response_message_ephemeral": False},
        "resource": {"type": body["type"]},
    }  # fmt: skip
