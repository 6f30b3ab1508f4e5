"""Real SDK clients pointed at the fake model server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import openai
import pytest_asyncio

from tests.fakes.model_server import ModelServer


@pytest_asyncio.fixture
async def claude(model_server: ModelServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """An AsyncAnthropic client with retries off."""
    client = anthropic.AsyncAnthropic(api_key="test", base_url=model_server.base_url, max_retries=0)
    yield client
    await client.close()


@pytest_asyncio.fixture
async def gpt(model_server: ModelServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """An AsyncOpenAI client with retries off."""
    client = openai.AsyncOpenAI(api_key="test", base_url=model_server.base_url + "/v1", max_retries=0)
    yield client
    await client.close()
