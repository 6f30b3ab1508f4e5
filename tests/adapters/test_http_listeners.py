"""Slow and surplus clients on the three HTTP listeners (Telegram webhook, Slack events, /health).

Each listener is started the way ``switchboard run`` starts it, from config.yaml with small
limits, and attacked over raw TCP: a client that trickles its headers or its body is cut off,
one connection past the cap is answered 503 at once, and a real client (the Telegram emulator
delivering an update, a signed Slack request, ``GET /health``) is answered once the slow
ones are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from adapters.http_listener import ListenerLimits
from gateway import event_loop
from gateway.operations.health import HealthServer

# The two platforms' gateway fixtures, shared with this module (pytest finds fixtures by name; the emulators'
# own fixtures come from tests/fakes/fixtures.py).
from tests.adapters.slack.conftest import SIGNING_SECRET, SlackFactory, slack_home, start_slack  # noqa: F401
from tests.adapters.telegram.conftest import ALICE, StartTelegram, start_telegram  # noqa: F401
from tests.adapters.telegram.test_webhook import free_port, webhook_config
from tests.fakes.slack_api import post_signed
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

HANG_GUARD = 30.0
"""Bounds every wait, only so that a broken server fails the test instead of hanging it."""

LISTENERS = ["telegram webhook", "slack events", "health"]


@dataclass
class Listener:
    host: str
    port: int
    path: str
    answered: Callable[[], Awaitable[None]]
    """Returns once a real client got its answer (trying again while it is refused)."""


StartListener = Callable[..., Awaitable[Listener]]


@pytest.fixture
def start_listener(
    request: pytest.FixtureRequest, start_telegram: StartTelegram, start_slack: SlackFactory, telegram_api: TelegramAPI
) -> StartListener:
    """Start a gateway whose listener ``request.param`` has the given limits (config keys of its listen section)."""
    kind = request.param

    async def start(**limits: Any) -> Listener:
        if kind == "telegram webhook":
            port = free_port()
            section = webhook_config(port)
            section["webhook_listen"] = {**section["webhook_listen"], **limits}  # type: ignore[dict-item]
            await start_telegram(telegram=section)
            return Listener("127.0.0.1", port, "/telegram-hook", lambda: telegram_delivered(telegram_api))
        if kind == "slack events":
            listen = {"host": "127.0.0.1", "port": 0, "path": "/slack/events", **limits}
            slack = await start_slack("http", http_listen=listen)
            return listener_at(slack.url, lambda: slack_answered(slack.url))
        run = await start_telegram(health={"port": 0, **limits})
        assert run.gateway.health_url
        return listener_at(run.gateway.health_url, lambda: health_answered(run.gateway.health_url or ""))

    return start


def listener_at(url: str, answered: Callable[[], Awaitable[None]]) -> Listener:
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    return Listener(parts.hostname, parts.port, parts.path, answered)


async def telegram_delivered(api: TelegramAPI) -> None:
    """Telegram (the emulator, with aiogram's request shape and the secret) delivers an update; it retries until 200."""
    update = await api.say(ALICE, "a real update")
    await eventually(lambda: (update["update_id"], 200) in api.webhook_deliveries, "the update delivered with a 200",
                     timeout=HANG_GUARD)  # fmt: skip


async def slack_answered(url: str) -> None:
    """A request signed like Slack's is answered by slack-bolt."""

    async def attempt() -> bool:
        answer = await post_signed(url, {"type": "url_verification", "challenge": "c-1", "token": "t"}, SIGNING_SECRET)
        return answer.status == 200 and answer.json() == {"challenge": "c-1"}

    await until_answered(attempt)


async def health_answered(url: str) -> None:
    async def attempt() -> bool:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            # 200 or 503 with the JSON snapshot; a full listener's 503 is plain text
            return response.content_type == "application/json" and "adapters" in json.loads(await response.text())

    await until_answered(attempt)


async def until_answered(attempt: Callable[[], Awaitable[bool]]) -> None:
    """Try again while the listener refuses (503) or drops the connection; it has to answer in the end."""

    async def answered() -> bool:
        with contextlib.suppress(aiohttp.ClientError):
            return await attempt()
        return False

    await eventually(answered, "the listener to answer", timeout=HANG_GUARD, interval=0.05)


@contextlib.asynccontextmanager
async def raw_connection(listener: Listener) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(listener.host, listener.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the connection."""
    try:
        async with asyncio.timeout(HANG_GUARD):
            return await reader.read()
    except ConnectionResetError:
        return b""


async def trickle(writer: asyncio.StreamWriter) -> None:
    """A slow client: one more byte of a header value every fifth of a second, for as long as the connection lasts
    (one growing header, so that no limit on the number or size of headers ends it soon)."""
    with contextlib.suppress(ConnectionError):
        writer.write(b"X-Slow: ")
        while True:
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.2)  # the slow client's pace, part of the scenario


def request_head(listener: Listener, *headers: str) -> bytes:
    return "".join([f"POST {listener.path} HTTP/1.1\r\n", f"Host: {listener.host}\r\n", *headers]).encode()


async def slow_clients_are_cut_off(listener: Listener) -> None:
    """Under SLOW limits: slow headers, a slow body, slow headers of the next request on a kept-alive connection."""
    # Headers: a byte every 0.2 s, never the blank line that ends them.
    async with raw_connection(listener) as (reader, writer):
        writer.write(request_head(listener))
        slowly = asyncio.create_task(trickle(writer))
        try:
            assert await until_closed(reader) == b""  # closed without an answer: there was no request
        finally:
            slowly.cancel()

    # Body: the headers promise 100 bytes, the client sends 1 and stops. (The server closes the connection
    # after aiohttp's lingering time, not waited for here.)
    async with raw_connection(listener) as (reader, writer):
        writer.write(request_head(listener, "Content-Length: 100\r\n", "\r\n", "{"))
        async with asyncio.timeout(HANG_GUARD):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in head, head

    # Kept alive: one whole request (refused, unsigned, but answered), then the start of the next one.
    async with raw_connection(listener) as (reader, writer):
        writer.write(request_head(listener, "Content-Length: 2\r\n", "\r\n", "{}"))
        async with asyncio.timeout(HANG_GUARD):
            head = await reader.readuntil(b"\r\n\r\n")
            [length] = [int(line[15:]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
            await reader.readexactly(length)
        assert b"Connection: close" not in head, head
        writer.write(request_head(listener))
        assert await until_closed(reader) == b""


async def full_listener_refuses(listener: Listener) -> None:
    """Under CAPPED limits: a connection past the cap is refused; real clients get in once slow ones leave."""
    async with contextlib.AsyncExitStack() as slow_ones:
        for _ in range(2):
            _, writer = await slow_ones.enter_async_context(raw_connection(listener))
            writer.write(request_head(listener))
        async with raw_connection(listener) as (reader, _):
            refused = await until_closed(reader)
        assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
        assert b"Retry-After:" in refused
    # The slow clients gave up: a real one is answered.
    await listener.answered()


async def idle_connections_are_closed(listener: Listener) -> None:
    """Under IDLE limits: a kept-alive connection that sends no next request is closed."""
    async with raw_connection(listener) as (reader, writer):
        writer.write(request_head(listener, "Content-Length: 2\r\n", "\r\n", "{}"))
        answer = await until_closed(reader)
        assert answer.startswith(b"HTTP/1.1 ") and b"Connection: close" not in answer, answer


IDLE = {"idle_timeout": 1}
"""The limits for :func:`idle_connections_are_closed` (not a config key: the default is fixed)."""
SLOW = {"header_timeout": 1, "body_timeout": 1}
"""The limits for :func:`slow_clients_are_cut_off`."""
CAPPED = {"max_connections": 2, "header_timeout": 600}
"""The limits for :func:`full_listener_refuses`: a header timeout that does not end its slow clients."""


@pytest.mark.parametrize("start_listener", LISTENERS, indirect=True)
async def test_a_client_slow_with_its_headers_or_body_is_cut_off(start_listener: StartListener) -> None:
    listener = await start_listener(**SLOW)
    await slow_clients_are_cut_off(listener)
    await listener.answered()


@pytest.mark.parametrize("start_listener", LISTENERS, indirect=True)
async def test_connections_past_the_cap_are_refused_and_real_clients_get_in_once_slow_ones_leave(
    start_listener: StartListener,
) -> None:
    await full_listener_refuses(await start_listener(**CAPPED))


@pytest.mark.parametrize(
    ("scenario", "limits"),
    [(slow_clients_are_cut_off, SLOW), (full_listener_refuses, CAPPED), (idle_connections_are_closed, IDLE)],
    ids=["slow", "capped", "idle"],
)
def test_the_limits_hold_on_uvloop_the_loop_the_gateway_runs_on(
    scenario: Callable[[Listener], Awaitable[None]], limits: dict[str, float]
) -> None:
    """The tests above run on asyncio's loop, the gateway on uvloop: the same scenarios (and the idle timeout,
    which config does not offer) against /health there."""

    async def snapshot() -> dict[str, Any]:
        return {"status": "ok", "adapters": {}}

    async def run() -> None:
        server = HealthServer(snapshot, "127.0.0.1", 0, limits=ListenerLimits(**limits))  # type: ignore[arg-type]
        url = await server.start()
        try:
            await scenario(listener_at(url, lambda: health_answered(url)))
        finally:
            await server.stop()

    event_loop.run(run(), event_loop.loop_factory("uvloop"))
