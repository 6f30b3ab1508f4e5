"""The doctor's check of a Telegram bot token: one ``getMe`` with plain aiohttp."""

from __future__ import annotations

from typing import Any, Final

import aiohttp

from adapters.contract import Probe, Where
from adapters.probing import host_of, json_body

TELEGRAM_API: Final = "https://api.telegram.org"


async def probe(section: Any, http: aiohttp.ClientSession, where: Where) -> Probe:
    base = (section.api_base_url or TELEGRAM_API).rstrip("/")
    fix = f"copy the token again from @BotFather (/mybots > your bot > API Token) into {where('token')}"
    async with http.get(f"{base}/bot{section.token}/getMe") as response:
        body = await json_body(response)
    if response.status == 200 and body.get("ok"):
        bot = body.get("result") or {}
        return Probe(True, f"token accepted by {host_of(base)}: @{bot.get('username')} (id {bot.get('id')})")
    if response.status in (401, 404):
        return Probe(False, f"Telegram rejected the token ({response.status} {body.get('description', '')})".rstrip(), fix)
    return Probe(False, f"{host_of(base)} answered {response.status}: {body.get('description', 'no description')}",
                 "try again in a minute; if it persists, check platforms.telegram.api_base_url")  # fmt: skip
