"""Small helpers for the read-only credential checks adapters make for ``switchboard doctor``.

Each adapter's ``probe`` makes one documented call with plain aiohttp (no
platform library involved) and says what it found as an
:class:`adapters.contract.Probe`; network failures are left to the caller.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp


async def json_body(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """The response's JSON object; ``{}`` when it is not one."""
    try:
        body = await response.json(content_type=None)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def host_of(base: str) -> str:
    """The host (and port) of a base URL, for messages."""
    return urlsplit(base).netloc or base
