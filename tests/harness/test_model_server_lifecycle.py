"""Lifecycle of the fake model server: session fixture, per-test reset, bounded stalls."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import pytest

from tests.fakes.model_server import MAX_STALL_SECONDS, FakeClock, ModelServer, Text, Timeout
from tests.fakes.model_server.cache import marker_ttl
from tests.waiting import eventually

CACHED_SYSTEM = [{"type": "text", "text": "system prompt " * 30, "cache_control": {"type": "ephemeral"}}]
HELLO: Any = [{"role": "user", "content": "hello"}]
SYSTEM: Any = CACHED_SYSTEM


async def test_one_server_per_session(model_server: ModelServer, model_server_session: ModelServer) -> None:
    assert model_server is model_server_session
    assert model_server.port != 0
    assert model_server.base_url == f"http://127.0.0.1:{model_server.port}"


async def test_reset_forgets_everything(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    await claude.messages.create(model="m", max_tokens=8, system=SYSTEM, messages=HELLO)
    model_server.script(Text("left over"))
    model_server.clock.advance(10)
    model_server.context_limit = 1
    model_server.responder = lambda record: None

    model_server.reset()

    assert model_server.requests == [] and model_server.pending == 0
    assert model_server.clock.now() == FakeClock().now()
    assert model_server.context_limit is None and model_server.responder is None
    again = await claude.messages.create(model="m", max_tokens=8, system=SYSTEM, messages=HELLO)
    assert again.usage.cache_read_input_tokens == 0


async def test_reset_releases_a_stalled_request(model_server: ModelServer) -> None:
    model_server.script(Timeout(MAX_STALL_SECONDS))
    client = anthropic.AsyncAnthropic(api_key="t", base_url=model_server.base_url, max_retries=0, timeout=5.0)
    started = time.monotonic()
    try:
        call = asyncio.ensure_future(client.messages.create(model="m", max_tokens=8, messages=HELLO))
        await eventually(lambda: model_server.requests, "the request to reach the server")
        model_server.reset()
        with pytest.raises(anthropic.InternalServerError) as error:
            await call
    finally:
        await client.close()
    assert error.value.status_code == 503
    assert time.monotonic() - started < 2.0


def test_timeouts_are_bounded() -> None:
    assert Timeout(10_000).bounded_seconds() == MAX_STALL_SECONDS
    assert Timeout(-1).bounded_seconds() == 0.0


def test_clock_only_moves_forward() -> None:
    clock = FakeClock()
    clock.advance(1.5)
    assert clock.now() == FakeClock().now() + 1.5
    with pytest.raises(ValueError):
        clock.advance(-1)


@pytest.mark.parametrize(
    ("marker", "seconds"),
    [
        ({"type": "ephemeral"}, 300.0),
        ({"type": "ephemeral", "ttl": "5m"}, 300.0),
        ({"type": "ephemeral", "ttl": "1h"}, 3600.0),
    ],
)
def test_marker_ttl(marker: dict[str, str], seconds: float) -> None:
    assert marker_ttl(marker) == seconds
