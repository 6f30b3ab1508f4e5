"""POSTing Events API requests signed the way Slack signs them (v0, HMAC-SHA256)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}`` keyed with the signing secret."""
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return f"v0={digest}"


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    no_retry: bool = False
    """The answer carries ``X-Slack-No-Retry: 1``: Slack would not send the request again."""

    def json(self) -> Any:
        return json.loads(self.text)


async def post_signed(
    url: str,
    payload: dict[str, Any],
    secret: str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    retry_reason: str = "http_timeout",
    bad_signature: bool = False,
) -> Answer:
    """POST ``payload`` as JSON with Slack's signature headers; returns status and body."""
    return await post_signed_body(url, json.dumps(payload).encode(), secret, timestamp=timestamp, retry_num=retry_num,
                                  retry_reason=retry_reason, bad_signature=bad_signature)  # fmt: skip


async def post_signed_form(url: str, payload: dict[str, Any], secret: str) -> Answer:
    """POST ``payload`` as Slack posts an interactive one (a press of a button): a signed form whose ``payload``
    field holds the JSON."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return await post_signed_body(url, body, secret, content_type="application/x-www-form-urlencoded")


async def post_signed_body(
    url: str,
    body: bytes,
    secret: str,
    *,
    content_type: str = "application/json",
    timestamp: int | str | None = None,
    retry_num: int | None = None,
    retry_reason: str = "http_timeout",
    bad_signature: bool = False,
) -> Answer:
    """POST ``body`` exactly as given (any bytes, any content type) with Slack's signature headers.

    ``timestamp`` may be any string, to send a header that is not a number."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature("not-the-secret" if bad_signature else secret, ts, body),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as response:
        return Answer(response.status, await response.text(), response.headers.get("X-Slack-No-Retry") == "1")
