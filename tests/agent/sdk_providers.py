"""The providers through the real anthropic and openai SDKs, pointed at the fake model server (no tests here)."""

from __future__ import annotations

from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import Provider
from agent.providers.openai_chat import OpenAIProvider
from tests.fakes.model_server import ModelServer


def build(kind: str, server: ModelServer, *, stream: bool = True, timeout: float = 30.0) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider(api_key="test", base_url=server.base_url, stream=stream, timeout=timeout)
    return OpenAIProvider(api_key="test", base_url=server.base_url + "/v1", stream=stream, timeout=timeout)
