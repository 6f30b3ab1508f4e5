"""The doctor's check of a Discord bot token (and of the Message Content intent) with plain aiohttp."""

from __future__ import annotations

from typing import Any, Final

import aiohttp

from adapters.contract import Probe, Where
from adapters.probing import host_of, json_body

DISCORD_API: Final = "https://discord.com/api/v10"
_MESSAGE_CONTENT_FLAGS: Final = (1 << 18) | (1 << 19)
"""Discord application flags: GATEWAY_MESSAGE_CONTENT and its "limited" variant (under 100 servers)."""


async def probe(section: Any, http: aiohttp.ClientSession, where: Where) -> Probe:
    base = (section.api_base_url or DISCORD_API).rstrip("/")
    headers = {"Authorization": f"Bot {section.token}"}
    async with http.get(f"{base}/users/@me", headers=headers) as response:
        me = await json_body(response)
    if response.status == 401:
        return Probe(False, "Discord rejected the token (401 Unauthorized)",
                     "Developer Portal > your application > Bot > Reset Token, then put the new token in "
                     + where("token"))  # fmt: skip
    if response.status != 200:
        return Probe(False, f"{host_of(base)} answered {response.status}: {me.get('message', 'no message')}",
                     "try again in a minute (429 means rate limited); if it persists, check api_base_url")  # fmt: skip
    detail = f"token accepted by {host_of(base)}: {me.get('username')} (id {me.get('id')})"
    if section.message_content_intent:
        async with http.get(f"{base}/applications/@me", headers=headers) as response:
            app = await json_body(response)
        if response.status == 200 and not int(app.get("flags") or 0) & _MESSAGE_CONTENT_FLAGS:
            return Probe(False, detail + ", but the Message Content intent is off in the Developer Portal "
                         "(the gateway would close with 4014)",
                         "Developer Portal > Bot > Privileged Gateway Intents: turn on Message Content Intent, "
                         "or set platforms.discord.message_content_intent: false")  # fmt: skip
        if response.status == 200:
            detail += ", Message Content intent on"
    return Probe(True, detail)
