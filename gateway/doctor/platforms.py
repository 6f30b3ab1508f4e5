"""Asking each platform whether its token is good, with plain aiohttp requests.

No platform library is imported (they take seconds to load): one documented
read-only call each, ``getMe``, ``GET /users/@me`` and ``auth.test``. The
token travels only in the request; anything printed is redacted by the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp

from config import LoadedConfig
from gateway.doctor.results import Check

TELEGRAM_API: Final = "https://api.telegram.org"
DISCORD_API: Final = "https://discord.com/api/v10"
SLACK_API: Final = "https://slack.com/api/"
TIMEOUT: Final = aiohttp.ClientTimeout(total=10)
_MESSAGE_CONTENT_FLAGS: Final = (1 << 18) | (1 << 19)
"""Discord application flags: GATEWAY_MESSAGE_CONTENT and its "limited" variant (under 100 servers)."""

PlatformCheck = Callable[[aiohttp.ClientSession, LoadedConfig], Awaitable[Check]]


async def telegram_check(session: aiohttp.ClientSession, loaded: LoadedConfig) -> Check:
    cfg = loaded.settings.platforms.telegram
    base = (cfg.api_base_url or TELEGRAM_API).rstrip("/")
    fix = f"copy the token again from @BotFather (/mybots > your bot > API Token) into {_where(loaded, 'telegram', 'token')}"
    async with session.get(f"{base}/bot{cfg.token}/getMe") as response:
        body = await _json(response)
    if response.status == 200 and body.get("ok"):
        bot = body.get("result") or {}
        return Check.ok("telegram", f"token accepted by {_host(base)}: @{bot.get('username')} (id {bot.get('id')})")
    if response.status in (401, 404):
        return Check.fail("telegram", f"Telegram rejected the token ({response.status} {body.get('description', '')})".rstrip(), fix)
    return Check.fail("telegram", f"{_host(base)} answered {response.status}: {body.get('description', 'no description')}",
                      "try again in a minute; if it persists, check platforms.telegram.api_base_url")  # fmt: skip


async def discord_check(session: aiohttp.ClientSession, loaded: LoadedConfig) -> Check:
    cfg = loaded.settings.platforms.discord
    base = (cfg.api_base_url or DISCORD_API).rstrip("/")
    headers = {"Authorization": f"Bot {cfg.token}"}
    async with session.get(f"{base}/users/@me", headers=headers) as response:
        me = await _json(response)
    if response.status == 401:
        return Check.fail("discord", "Discord rejected the token (401 Unauthorized)",
                          "Developer Portal > your application > Bot > Reset Token, then put the new token in "
                          + _where(loaded, "discord", "token"))  # fmt: skip
    if response.status != 200:
        return Check.fail("discord", f"{_host(base)} answered {response.status}: {me.get('message', 'no message')}",
                          "try again in a minute (429 means rate limited); if it persists, check api_base_url")  # fmt: skip
    detail = f"token accepted by {_host(base)}: {me.get('username')} (id {me.get('id')})"
    if cfg.message_content_intent:
        async with session.get(f"{base}/applications/@me", headers=headers) as response:
            app = await _json(response)
        if response.status == 200 and not int(app.get("flags") or 0) & _MESSAGE_CONTENT_FLAGS:
            return Check.fail("discord", detail + ", but the Message Content intent is off in the Developer Portal "
                              "(the gateway would close with 4014)",
                              "Developer Portal > Bot > Privileged Gateway Intents: turn on Message Content Intent, "
                              "or set platforms.discord.message_content_intent: false")  # fmt: skip
        if response.status == 200:
            detail += ", Message Content intent on"
    return Check.ok("discord", detail)


async def slack_check(session: aiohttp.ClientSession, loaded: LoadedConfig) -> Check:
    cfg = loaded.settings.platforms.slack
    base = (cfg.api_base_url or SLACK_API).rstrip("/")
    if cfg.mode == "socket" and not (cfg.app_token or "").startswith("xapp-"):
        return Check.fail("slack", "the app-level token does not start with xapp- (Socket Mode needs one)",
                          "Basic Information > App-Level Tokens: generate one with connections:write, put it in "
                          + _where(loaded, "slack", "app_token"))  # fmt: skip
    headers = {"Authorization": f"Bearer {cfg.bot_token}"}
    async with session.post(f"{base}/auth.test", headers=headers) as response:
        body = await _json(response)
    if response.status == 200 and body.get("ok"):
        return Check.ok("slack", f"bot token accepted by {_host(base)}: {body.get('user')} in {body.get('team')}")
    if response.status == 200:
        return Check.fail("slack", f"Slack rejected the bot token ({body.get('error', 'no error code')})",
                          "OAuth & Permissions > Bot User OAuth Token (xoxb-): copy it into "
                          + _where(loaded, "slack", "bot_token") + " (reinstall the app if it was revoked)")  # fmt: skip
    return Check.fail("slack", f"{_host(base)} answered {response.status}",
                      "try again in a minute; if it persists, check platforms.slack.api_base_url")  # fmt: skip


PLATFORM_CHECKS: Mapping[str, PlatformCheck] = {
    "telegram": telegram_check,
    "discord": discord_check,
    "slack": slack_check,
}


async def run_platform_check(name: str, loaded: LoadedConfig) -> Check:
    """One platform's check, with network failures turned into a FAIL line."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        try:
            return await PLATFORM_CHECKS[name](session, loaded)
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            reason = str(error) or type(error).__name__
            return Check.fail(name, f"could not reach the {name} API: {reason}",
                              "check this machine's network, DNS and proxy, and api_base_url if you set one")  # fmt: skip


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    try:
        body = await response.json(content_type=None)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _where(loaded: LoadedConfig, platform: str, key: str) -> str:
    path = f"platforms.{platform}.{key}"
    variable = loaded.variable_for(path)
    return f"{variable} (environment or {loaded.home / '.env'})" if variable else f"{path} in config.yaml"


def _host(base: str) -> str:
    return urlsplit(base).netloc or base
