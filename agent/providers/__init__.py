"""Model providers: Anthropic Messages and OpenAI-compatible Chat Completions.

The concrete providers import their SDKs, which take seconds to load, so
:func:`make_provider` imports only the one asked for, when it is asked for;
importing this package loads neither SDK.
"""

from __future__ import annotations

from agent.providers.base import Provider


def make_provider(kind: str, *, api_key: str | None, base_url: str | None, timeout: float) -> Provider:
    """The provider for ``kind``: ``"anthropic"`` for the Messages API, anything else for Chat Completions."""
    if kind == "anthropic":
        from agent.providers.anthropic_messages import AnthropicProvider

        return AnthropicProvider(api_key=api_key, base_url=base_url, timeout=timeout)
    from agent.providers.openai_chat import OpenAIProvider

    return OpenAIProvider(api_key=api_key, base_url=base_url, timeout=timeout)
