"""The doctor's check of a Slack app's tokens: the app-level token's shape, then ``auth.test`` with plain aiohttp."""

from __future__ import annotations

from typing import Any, Final

import aiohttp

from adapters.contract import Probe, Where
from adapters.probing import host_of, json_body

SLACK_API: Final = "https://slack.com/api/"


async def probe(section: Any, http: aiohttp.ClientSession, where: Where) -> Probe:
    base = (section.api_base_url or SLACK_API).rstrip("/")
    if section.mode == "socket" and not (section.app_token or "").startswith("xapp-"):
        return Probe(False, "the app-level token does not start with xapp- (Socket Mode needs one)",
                     "Basic Information > App-Level Tokens: generate one with connections:write, put it in "
                     + where("app_token"))  # fmt: skip
    headers = {"Authorization": f"Bearer {section.bot_token}"}
    async with http.post(f"{base}/auth.test", headers=headers) as response:
        body = await json_body(response)
    if response.status == 200 and body.get("ok"):
        return Probe(True, f"bot token accepted by {host_of(base)}: {body.get('user')} in {body.get('team')}")
    if response.status == 200:
        return Probe(False, f"Slack rejected the bot token ({body.get('error', 'no error code')})",
                     "OAuth & Permissions > Bot User OAuth Token (xoxb-): copy it into "
                     + where("bot_token") + " (reinstall the app if it was revoked)")  # fmt: skip
    return Probe(False, f"{host_of(base)} answered {response.status}",
                 "try again in a minute; if it persists, check platforms.slack.api_base_url")  # fmt: skip
