"""Model providers: Anthropic Messages and OpenAI-compatible Chat Completions.

The concrete providers import their SDKs, so import them by module
(``agent.providers.anthropic_messages``) only where a model is really called.
"""
