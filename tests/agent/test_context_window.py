"""Model context lengths: the table, overrides and the unknown-model fallback."""

from __future__ import annotations

import uuid

import pytest
from structlog.testing import capture_logs

from agent.context_window import CONTEXT_LENGTHS, DEFAULT_CONTEXT_LENGTH, ContextWindow, context_length


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-sonnet-4-20250514", 200_000),
        ("anthropic/claude-3.5-sonnet", 200_000),
        ("claude-haiku-4-5", 200_000),
        ("claude-opus-4-6", 1_000_000),
        ("claude-sonnet-4.6", 1_000_000),
        ("claude-opus-4-7-20260101", 1_000_000),
        ("anthropic.claude-opus-4-6-v1:0", 1_000_000),
        ("gpt-4o", 128_000),
        ("openai/gpt-4o-mini", 128_000),
        ("chatgpt-4o-latest", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("gpt-5.4", 1_050_000),
        ("gpt-5.4-mini", 400_000),
        ("gpt-5.6-luna", 1_050_000),
        ("o3-mini", 200_000),
        ("o1-mini", 128_000),
        ("gemini-2.5-pro", 1_048_576),
        ("models/gemini-2.5-flash", 1_048_576),
        ("llama-3-70b", 131_072),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("qwen3-coder-480b", 262_144),
        ("deepseek-ai/DeepSeek-V3.1", 128_000),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32_768),
    ],
)
def test_table_lookup(model: str, tokens: int) -> None:
    window = context_length(model)
    assert window.tokens == tokens
    assert window.source == "table"


def test_longest_matching_key_wins() -> None:
    assert context_length("gpt-4.1").key == "gpt-4.1"
    assert context_length("gpt-4-turbo").key == "gpt-4"
    assert context_length("claude-opus-4-6").key == "claude-opus-4-6"
    assert context_length("claude-3-opus").key == "claude"


def test_matching_ignores_case_and_provider_prefixes() -> None:
    expected = ContextWindow(1_000_000, "table", "claude-opus-4-6")
    assert context_length("OpenRouter/Anthropic/CLAUDE-OPUS-4-6") == expected
    assert context_length("  openai/GPT-4.1  ").tokens == 1_047_576


def test_short_keys_match_only_at_a_word_boundary() -> None:
    with capture_logs():
        assert context_length(f"pro1-{uuid.uuid4().hex}").source == "default"
        assert context_length(f"ollama-{uuid.uuid4().hex}").source == "default"  # not "llama"
    assert context_length("o1").tokens == 200_000


def test_override_wins_over_the_table_and_the_default() -> None:
    assert context_length("claude-opus-4-6", override=32_000) == ContextWindow(32_000, "override")
    with capture_logs() as logs:
        assert context_length(f"my-finetune-{uuid.uuid4().hex}", override=16_384).tokens == 16_384
    assert logs == []


def test_zero_override_means_not_configured_and_negative_is_an_error() -> None:
    assert context_length("gpt-4o", override=0).source == "table"
    with pytest.raises(ValueError, match="model.context_length"):
        context_length("gpt-4o", override=-1)


def test_unknown_model_gets_the_default_and_one_warning_naming_the_key() -> None:
    model = f"totally-unknown-{uuid.uuid4().hex}"
    with capture_logs() as logs:
        first = context_length(model)
        second = context_length(model)
    assert first == second == ContextWindow(DEFAULT_CONTEXT_LENGTH, "default")
    assert logs == [
        {
            "event": "context_window.unknown_model",
            "log_level": "warning",
            "model": model,
            "assumed": DEFAULT_CONTEXT_LENGTH,
            "hint": "set model.context_length in config.yaml",
        }
    ]


def test_each_unknown_model_warns_separately() -> None:
    names = [f"mystery-{uuid.uuid4().hex}" for _ in range(2)]
    with capture_logs() as logs:
        for name in names:
            context_length(name)
    assert [entry["model"] for entry in logs] == names


def test_default_is_conservative() -> None:
    frontier = [tokens for key, tokens in CONTEXT_LENGTHS.items() if key.startswith(("claude", "gpt-", "gemini"))]
    assert DEFAULT_CONTEXT_LENGTH <= min(frontier)


def test_table_keys_are_lower_case_and_positive() -> None:
    assert all(key == key.lower() and tokens > 0 for key, tokens in CONTEXT_LENGTHS.items())


def test_a_custom_table_can_be_passed() -> None:
    window = context_length("house-model-v2", table={"house-model": 64_000})
    assert window == ContextWindow(64_000, "table", "house-model")
