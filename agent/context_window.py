"""How many tokens a model's context window holds.

Usage::

    context_length("claude-sonnet-4-6")                 # ContextWindow(1_000_000, "table", ...)
    context_length("openai/gpt-4o-mini")                # 128_000: provider prefix ignored
    context_length("my-finetune", override=32_000)      # the configured value always wins
    context_length("my-finetune")                       # 128_000, and a warning naming the key to set

The table is matched case-insensitively, after dropping everything up to the
last "/" (``anthropic/``, ``openrouter/meta-llama/``). A key matches where it
starts the name or follows a separator (so ``o3`` matches ``o3-mini`` but not
``pro3``), and the longest matching key wins (``gpt-4.1`` over ``gpt-4``).
A model the table does not know gets ``DEFAULT_CONTEXT_LENGTH``: a size every
current chat model reaches, so budgeting stays safe, with one warning per model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

import structlog

__all__ = ["CONTEXT_LENGTHS", "DEFAULT_CONTEXT_LENGTH", "ContextWindow", "context_length"]

log = structlog.get_logger("agent.context")

DEFAULT_CONTEXT_LENGTH: Final = 128_000
"""Assumed for a model not in the table (and without ``model.context_length``)."""
CONFIG_HINT: Final = "set model.context_length in config.yaml"

CONTEXT_LENGTHS: Final[Mapping[str, int]] = {
    # Anthropic: current 1M-window models, everything else Claude at 200k.
    "claude": 200_000,
    "claude-fable": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-sonnet-4.6": 1_000_000,
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4.6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4.7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-opus-4.8": 1_000_000,
    # OpenAI.
    "gpt-5": 400_000,
    "gpt-5.1-chat": 128_000,
    "gpt-5.3-codex-spark": 128_000,
    "gpt-5.4": 1_050_000,
    "gpt-5.4-mini": 400_000,
    "gpt-5.4-nano": 400_000,
    "gpt-5.5": 1_050_000,
    "gpt-5.6": 1_050_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4": 128_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Google.
    "gemini": 1_048_576,
    "gemma": 8_192,
    "gemma-3": 131_072,
    "gemma-4": 256_000,
    # Open-weight families, as their providers usually serve them.
    "deepseek": 128_000,
    "deepseek-chat": 1_000_000,
    "deepseek-reasoner": 1_000_000,
    "deepseek-v4": 1_000_000,
    "llama": 131_072,
    "qwen": 131_072,
    "qwen3-coder": 262_144,
    "mistral": 32_768,
    "mistral-large": 131_072,
    "mistral-medium": 131_072,
    "mistral-small": 131_072,
    "ministral": 131_072,
    "mixtral": 32_768,
    "codestral": 256_000,
    "grok": 131_072,
    "grok-4": 256_000,
    "grok-4-fast": 2_000_000,
    "grok-4.20": 2_000_000,
    "kimi": 262_144,
    "kimi-k3": 1_048_576,
    "glm": 202_752,
    "glm-5.2": 1_048_576,
    "minimax": 204_800,
    "minimax-m3": 1_000_000,
    "nemotron": 131_072,
}
"""Context window per model-name key, in tokens. Keys are lower case."""

# A key must start the name or follow one of these, so "o1" never matches inside "pro1".
_SEPARATORS: Final = frozenset("-_.:@ ")
_warned: set[str] = set()


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """A model's context window and where the figure came from."""

    tokens: int
    source: Literal["override", "table", "default"]
    key: str | None = None
    """The table key that matched (``source == "table"`` only)."""


def _normalise(model: str) -> str:
    return model.strip().lower().rsplit("/", 1)[-1]


def _matches(key: str, name: str) -> bool:
    return any(at == 0 or name[at - 1] in _SEPARATORS for at in (m.start() for m in re.finditer(re.escape(key), name)))


def _lookup(name: str, table: Mapping[str, int]) -> str | None:
    keys = [key for key in table if key in name and _matches(key, name)]
    return max(keys, key=len) if keys else None


def context_length(
    model: str,
    override: int | None = None,
    *,
    table: Mapping[str, int] = CONTEXT_LENGTHS,
) -> ContextWindow:
    """The context window of ``model``; ``override`` (``model.context_length``) wins when set.

    ``override`` of None or 0 means "not configured"; a negative one is an error.
    Unknown models get ``DEFAULT_CONTEXT_LENGTH`` and, once per name, a warning.
    """
    if override is not None and override < 0:
        raise ValueError(f"model.context_length must be positive, got {override}")
    if override:
        return ContextWindow(override, "override")
    key = _lookup(_normalise(model), table)
    if key is not None:
        return ContextWindow(table[key], "table", key)
    if model not in _warned:
        _warned.add(model)
        log.warning("context_window.unknown_model", model=model, assumed=DEFAULT_CONTEXT_LENGTH, hint=CONFIG_HINT)
    return ContextWindow(DEFAULT_CONTEXT_LENGTH, "default")
