"""Fixtures of the agent's tests: ``provider`` is each SDK, streaming and not (a module may define its own);
``claude`` the Anthropic one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import Provider
from tests.agent.sdk_providers import build
from tests.fakes.model_server import ModelServer


@pytest_asyncio.fixture(params=[("anthropic", True), ("anthropic", False), ("openai", True), ("openai", False)],
                        ids=["anthropic-stream", "anthropic-plain", "openai-stream", "openai-plain"])
async def provider(request: pytest.FixtureRequest, model_server: ModelServer) -> AsyncIterator[Provider]:
    kind, stream = request.param
    instance = build(kind, model_server, stream=stream)
    yield instance
    await instance.aclose()


@pytest_asyncio.fixture
async def claude(model_server: ModelServer) -> AsyncIterator[AnthropicProvider]:
    """The Anthropic provider, streaming, on the fake model server."""
    instance = AnthropicProvider(api_key="test", base_url=model_server.base_url, timeout=30.0)
    yield instance
    await instance.aclose()
