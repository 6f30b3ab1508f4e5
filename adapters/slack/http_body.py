"""What a request to the HTTP events endpoint must be before slack-bolt reads it.

Bolt parses the body before it checks the signature, and takes for granted that
the body is a JSON object (or a form carrying one): anything else raised inside
Bolt and came back as a 500 with a traceback, signed or not. So the endpoint
checks first, in this order:

1. the signature: Slack's ``v0`` HMAC-SHA256 of ``v0:{timestamp}:{body}``,
   computed over the body's bytes (slack-sdk's verifier decodes the body
   first, so it cannot tell a signed body that is not UTF-8 from a forged
   one), and a timestamp at most five minutes off. A request that fails it
   gets 401 whatever its body;
2. the body's shape, as Bolt will read it: UTF-8; JSON (``application/json``,
   or a body starting with ``{``) that is an object, or a form whose
   ``payload`` is one (a form without it is only Slack's ``ssl_check``); a
   string ``type``; and for ``event_callback`` an ``event`` object with a
   ``type``. A signed body that fails this gets 400 with ``X-Slack-No-Retry: 1``
   (Slack retries any answer but a 2xx unless told not to), and the sender
   learns what was wrong.

Socket Mode envelopes carry the same payloads, and :func:`payload_problem`
checks them the same way (:mod:`adapters.slack.socket_mode`).

Neither answer says anything about the body's content in the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

MAX_AGE: Final = 300
"""Seconds a request's timestamp may be off the host clock, either way (Slack's own limit)."""


def signed(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether Slack signed this body with ``secret`` within the last five minutes."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    if abs(time.time() - int(timestamp)) > MAX_AGE:
        return False
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(f"v0={digest}".encode(), signature.encode("utf-8", "replace"))


def problem(body: bytes, content_type: str) -> str | None:
    """What makes ``body`` unreadable as a Slack request, or None when Bolt can take it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    if not text.strip():
        return "empty"
    if content_type == "application/json" or text.startswith("{"):
        return _object_problem(_json(text), "JSON")
    form = dict(parse_qsl(text, keep_blank_values=True))
    if "payload" in form:
        return _object_problem(_json(form["payload"]), "the form's payload")
    if "ssl_check" in form:
        return None  # Slack checking the certificate; Bolt answers it
    return "a form without a payload"


_NOT_JSON = object()
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def _object_problem(data: Any, what: str) -> str | None:
    if data is _NOT_JSON:
        return f"{what} is not valid JSON"
    return payload_problem(data, what)


def payload_problem(data: Any, what: str = "the payload") -> str | None:
    """What makes a parsed Slack payload unreadable for Bolt, or None when Bolt can take it."""
    if not isinstance(data, dict):
        return f"{what} is a JSON {_JSON_KINDS.get(type(data), 'value')}, not an object"
    if not isinstance(data.get("type"), str):
        return "no request type"
    if data["type"] != "event_callback":
        return None
    event = data.get("event")
    if not isinstance(event, dict):
        return "an event_callback without an event object"
    if not isinstance(event.get("type"), str):
        return "an event without a type"
    return None
