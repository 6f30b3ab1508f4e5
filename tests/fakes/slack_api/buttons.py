"""Block Kit in the fake Slack: the blocks a message may carry, and the ``block_actions`` payload of a press.

Only what the bot sends is modelled: ``section`` blocks with a text object and ``actions`` blocks of
``button`` elements. :func:`blocks_problem` refuses what Slack would answer ``invalid_blocks`` for (limits
on counts and lengths, duplicate action ids, an unknown style). :func:`block_actions` is the payload Slack
sends when a person clicks a button of a message, the same over Socket Mode (an ``interactive``
envelope) and in HTTP mode (a signed form POST whose ``payload`` field holds it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})


def blocks_problem(blocks: Any) -> str | None:
    """Why Slack would refuse ``blocks`` (``invalid_blocks``), or None."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "blocks must be a list of at most 50 blocks"
    action_ids: set[str] = set()
    for block in blocks:
        if not isinstance(block, dict):
            return "a block must be an object"
        if block.get("type") == "section":
            problem = _text_problem(block.get("text"), 3000)
        elif block.get("type") == "actions":
            problem = _actions_problem(block.get("elements"), action_ids)
        else:
            problem = f"block type {block.get('type')!r} is not emulated"
        if problem is not None:
            return problem
    return None


def _text_problem(text: Any, limit: int) -> str | None:
    if not isinstance(text, dict) or text.get("type") not in TEXT_TYPES:
        return "a text object needs a type of plain_text or mrkdwn"
    if not isinstance(text.get("text"), str) or not 1 <= len(text["text"]) <= limit:
        return f"a text object's text must be 1-{limit} characters"
    return None


def _actions_problem(elements: Any, action_ids: set[str]) -> str | None:
    if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
        return "an actions block holds 1 to 25 elements"
    for element in elements:
        if not isinstance(element, dict) or element.get("type") != "button":
            return "only button elements are emulated"
        action_id = element.get("action_id")
        if not isinstance(action_id, str) or not 1 <= len(action_id) <= 255 or action_id in action_ids:
            return "a button's action_id must be 1-255 characters and unique in the message"
        action_ids.add(action_id)
        if element.get("style") not in (None, "primary", "danger"):
            return "a button's style is primary or danger"
        text = element.get("text")
        if (problem := _text_problem(text, 75)) is not None or text.get("type") != "plain_text":
            return problem or "a button's text is plain_text"
    return None


def buttons_of(message: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The buttons a message shows now, by action id, each with the ``block_id`` of its actions block."""
    found: dict[str, dict[str, Any]] = {}
    for block in message.get("blocks") or ():
        for element in block.get("elements") or () if block.get("type") == "actions" else ():
            found[element["action_id"]] = {**element, "block_id": block.get("block_id", "")}
    return found


def block_actions(
    message: Mapping[str, Any], channel: str, action_id: str, user: str, *, team: str, app: str
) -> dict[str, Any]:
    """The payload of ``user`` (of workspace ``team``) clicking the button ``action_id`` of ``message`` (posted in
    ``channel`` by the app ``app``)."""
    button = buttons_of(message).get(action_id)
    if button is None:
        raise ValueError(f"message {message.get('ts')} in {channel} shows no button {action_id!r}")
    container = {"type": "message", "message_ts": message["ts"], "channel_id": channel, "is_ephemeral": False}
    if message.get("thread_ts"):
        container["thread_ts"] = message["thread_ts"]
    return {
        "type": "block_actions", "api_app_id": app, "token": "legacy-verification-token",
        "trigger_id": f"{int(time.time())}.trigger", "is_enterprise_install": False, "enterprise": None,
        "team": {"id": team, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "container": container,
        "channel": {"id": channel, "name": "directmessage" if channel.startswith("D") else "general"},
        "message": dict(message), "state": {"values": {}},
        "response_url": f"https://hooks.slack.invalid/actions/{team}/1/fake",
        "actions": [{
            "type": "button", "action_id": action_id, "block_id": button["block_id"], "text": button["text"],
            "value": button.get("value", ""), "action_ts": f"{time.time():.6f}",
            **({"style": button["style"]} if "style" in button else {}),
        }],
    }  # fmt: skip
