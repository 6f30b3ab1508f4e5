"""The three calls ``switchboard doctor`` makes to the platforms, served on 127.0.0.1.

Telegram ``GET /telegram/bot<token>/getMe``, Discord ``GET /discord/api/v10/users/@me``
and ``/applications/@me``, Slack ``POST /slack/api/auth.test``, each answering as
the real API does for a good and a bad token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

TELEGRAM_TOKEN = "123456789:AAgood-telegram-token-for-doctor-tests"
DISCORD_TOKEN = "good-discord-token.for-doctor.tests"
SLACK_BOT_TOKEN = "xoxb-good-slack-bot-token"
SLACK_APP_TOKEN = "xapp-1-good-slack-app-token"
MESSAGE_CONTENT = 1 << 18


@dataclass
class PlatformStubs:
    base_url: str
    discord_flags: int = MESSAGE_CONTENT

    @property
    def telegram(self) -> str:
        return f"{self.base_url}/telegram"

    @property
    def discord(self) -> str:
        return f"{self.base_url}/discord/api/v10"

    @property
    def slack(self) -> str:
        return f"{self.base_url}/slack/api/"


@asynccontextmanager
async def platform_stubs() -> AsyncIterator[PlatformStubs]:
    stubs = PlatformStubs("")

    async def get_me(request: web.Request) -> web.Response:
        if request.match_info["token"] != TELEGRAM_TOKEN:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        bot = {"id": 123456789, "is_bot": True, "first_name": "Doctor", "username": "doctor_test_bot"}
        return web.json_response({"ok": True, "result": bot})

    def discord_auth(request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bot {DISCORD_TOKEN}":
            return web.json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        return None

    async def users_me(request: web.Request) -> web.Response:
        return discord_auth(request) or web.json_response({"id": "42", "username": "doctor", "bot": True})

    async def applications_me(request: web.Request) -> web.Response:
        return discord_auth(request) or web.json_response({"id": "42", "flags": stubs.discord_flags})

    async def auth_test(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SLACK_BOT_TOKEN}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        return web.json_response({"ok": True, "team": "Doctors", "user": "doctor", "bot_id": "B1", "user_id": "U1"})

    app = web.Application()
    app.router.add_get("/telegram/bot{token}/getMe", get_me)
    app.router.add_get("/discord/api/v10/users/@me", users_me)
    app.router.add_get("/discord/api/v10/applications/@me", applications_me)
    app.router.add_post("/slack/api/auth.test", auth_test)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    stubs.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield stubs
    finally:
        await runner.cleanup()
