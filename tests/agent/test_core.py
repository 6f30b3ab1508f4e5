"""The agent facade: frozen prompts across turns, memory writes and restarts; caching TTL per session."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from agent.caching import CachePolicy
from agent.core import Agent, AgentSettings
from agent.memory_scopes import MemoryScope
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from tests.fakes.model_server import ModelServer, Text, ToolUse

STARTED = dt.datetime(2026, 11, 22, 9, 30, tzinfo=dt.timezone.utc)
ALICE = MemoryScope.person("telegram", "42")
BOB = MemoryScope.person("telegram", "43")


@pytest_asyncio.fixture
async def agent(model_server: ModelServer, tmp_path: Path) -> AsyncIterator[Agent]:
    provider = AnthropicProvider(api_key="test", base_url=model_server.base_url)
    router = ModelRouter([ModelTarget(provider, "claude-sonnet-4-6", CachePolicy(True, True))], RetryPolicy(max_attempts=1))
    yield Agent(AgentSettings(home=tmp_path, cache_ttl="auto"), router)
    await provider.aclose()


def system_text(body: dict) -> str:
    return "".join(block["text"] for block in body["system"])


async def test_prompt_stays_byte_identical_across_turns_a_memory_write_and_a_restart(
    agent: Agent, model_server: ModelServer
) -> None:
    prompt = await agent.build_prompt(session_id="S1", platform="telegram", started_at=STARTED, memory=ALICE,
                                      platform_hint="You are answering in Telegram.")  # fmt: skip
    assert prompt.text.endswith("You are answering in Telegram.") and (agent.settings.home / "SOUL.md").exists()
    session = agent.open_session(session_id="S1", platform="telegram", memory=ALICE)
    history = [prompt.message(), ChatMessage.user("remember that I like tea")]
    model_server.script(ToolUse("memory", {"action": "add", "target": "user", "content": "Likes tea."}), Text("noted"))
    first = await session.run_turn(history, user_time=1000.0)
    assert first.reply == "noted"
    assert "Likes tea." in (agent.settings.home / "memories" / "users" / "telegram" / "42" / "USER.md").read_text()

    history = [*first.history, ChatMessage.user("what do I like?")]
    model_server.script(Text("tea"))
    second = await session.run_turn(history, user_time=1060.0)

    # A "restart": a new Agent-side session from the stored snapshot, not a rebuilt prompt.
    reopened = agent.open_session(session_id="S1", platform="telegram", memory=ALICE, user_times=[1000.0, 1060.0])
    model_server.script(Text("still tea"))
    await reopened.run_turn([ChatMessage.system(prompt.text), *second.history[1:], ChatMessage.user("again?")], user_time=1100.0)

    systems = {system_text(record.body) for record in model_server.requests}
    assert systems == {prompt.text}
    assert "Likes tea." not in prompt.text  # the write changed the file, not the frozen prompt
    rebuilt = await agent.build_prompt(session_id="S1", platform="telegram", started_at=STARTED, memory=ALICE)
    assert "Likes tea." in rebuilt.text  # a new session sees the memory
    someone_else = await agent.build_prompt(session_id="S4", platform="telegram", started_at=STARTED, memory=BOB)
    assert "Likes tea." not in someone_else.text  # ...of the same person only


async def test_prompt_is_identical_when_built_twice_for_the_same_session(agent: Agent) -> None:
    one = await agent.build_prompt(session_id="S2", platform="discord", started_at=STARTED, memory=ALICE)
    two = await agent.build_prompt(session_id="S2", platform="discord", started_at=STARTED, memory=ALICE)
    assert one.text == two.text


async def test_cache_breakpoints_and_reads_across_turns(agent: Agent, model_server: ModelServer) -> None:
    prompt = await agent.build_prompt(session_id="S3", platform="slack", started_at=STARTED, memory=None)
    session = agent.open_session(session_id="S3", platform="slack", memory=None)
    history = [prompt.message()]
    for turn in range(6):
        history.append(ChatMessage.user(f"message {turn}: " + "detail " * 80))
        result = await session.run_turn(history, user_time=2000.0 + turn * 30)
        history = result.history
    reads = [record.figures.cache_read for record in model_server.requests]
    assert reads[0] == 0 and all(read > 0 for read in reads[1:])
    last = model_server.requests[-1].figures
    assert last.cache_read / last.prompt_tokens > 0.8
