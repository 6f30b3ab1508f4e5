"""Reading Bot API requests and writing its answers, in the Bot API's own JSON shapes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Failure:
    """A scripted error answer: HTTP ``status`` with Telegram's ``description``.

    ``proxy_page``: answer as a broken reverse proxy does instead, with an HTML page (not JSON) that
    echoes the request's path, bot token included, and ``description`` as more text on the page.
    """

    status: int
    description: str
    retry_after: int | None = None
    proxy_page: bool = False
    answer_lost: bool = False
    """Carry out the call, then cut the connection instead of answering (the other fields unused)."""

    @classmethod
    def too_many_requests(cls, retry_after: int) -> Failure:
        return cls(429, f"Too Many Requests: retry after {retry_after}", retry_after)

    @classmethod
    def server_error(cls) -> Failure:
        return cls(502, "Bad Gateway")

    @classmethod
    def broken_proxy(cls, status: int = 502, note: str = "") -> Failure:
        return cls(status, note, proxy_page=True)

    @classmethod
    def lost_answer(cls) -> Failure:
        """Telegram carries out the call, then the connection breaks before the answer reaches the bot."""
        return cls(0, "", answer_lost=True)

    @classmethod
    def cant_parse(cls) -> Failure:
        return cls(400, 'Bad Request: can\'t parse entities: Can\'t find end tag corresponding to start tag "b"')


def ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def error(status: int, description: str, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


def failure(scripted: Failure, path: str) -> web.Response:
    """The scripted answer to a request for ``path``."""
    if scripted.proxy_page:
        page = (f"<html><head><title>{scripted.status} Bad Gateway</title></head><body><h1>Bad Gateway</h1>"
                f"<p>The upstream server did not answer the request for {path}.</p><p>{scripted.description}</p>"
                "<hr><address>nginx</address></body></html>")  # fmt: skip
        return web.Response(status=scripted.status, text=page, content_type="text/html")
    return error(scripted.status, scripted.description, scripted.retry_after)


async def read_params(request: web.Request) -> dict[str, Any]:
    """The method's parameters from a query string, a form or a JSON body (aiogram sends forms)."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        params.update(body if isinstance(body, dict) else {})
    elif request.can_read_body:
        params.update({key: value for key, value in (await request.post()).items() if isinstance(value, str)})
    return params


def as_int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(value)


def as_bool(value: Any) -> bool:
    return value in (True, "true", "True", "1", 1)


def as_json(value: Any) -> Any:
    """Objects arrive JSON-encoded inside forms (``reply_parameters``, ``allowed_updates``)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
