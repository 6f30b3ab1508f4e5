"""Pictures and documents in turns: bytes read per call, vision per model, token estimates.

Through the real anthropic and openai SDKs against the fake model server; the media source is the
agent's injected seam (the gateway passes the home's media folder), here a dict.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from agent.caching import CachePolicy
from agent.core import Agent, AgentSettings
from agent.media import image_tokens, standin
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.tokens import estimate_message, estimate_text
from config import load_config
from gateway.agent_factory import build_agent
from tests.agent.media_support import SENT_TEXT, MemorySource, every_file, image_part, pdf_part, png, text_part
from tests.fakes.model_server import AuthFailed, ModelServer, Text, ToolUse

STARTED = dt.datetime(2026, 11, 27, 14, 0, tzinfo=dt.timezone.utc)
PICTURE = png(64, 40)


def make_agent(claude: AnthropicProvider, home: Path, source: MemorySource | None, *, vision: bool | None = None) -> Agent:
    target = ModelTarget(claude, "claude-sonnet-4-6", CachePolicy(True, True), vision)
    return Agent(AgentSettings(home=home), ModelRouter([target], RetryPolicy(max_attempts=1)), media=source)


async def turn_with(agent: Agent, *messages: ChatMessage) -> None:
    prompt = await agent.build_prompt(session_id="S1", platform="telegram", started_at=STARTED, memory=None)
    session = agent.open_session(session_id="S1", platform="telegram", memory=None)
    await session.run_turn([prompt.message(), *messages], user_time=1000.0)


async def test_the_turn_reads_each_file_once_and_every_call_carries_it(
    claude: AnthropicProvider, model_server: ModelServer, tmp_path: Path
) -> None:
    source = every_file()
    source.add(PICTURE)
    photo = image_part(PICTURE, 64, 40)
    model_server.script(ToolUse("memory", {"action": "add", "target": "user", "content": "Sends screenshots."}), Text("a grey box"))
    await turn_with(make_agent(claude, tmp_path, source), ChatMessage(role="user", content="what is it?", media=(photo, pdf_part())))
    first, second = model_server.requests
    assert [seen.wire for seen in first.media] == [seen.wire for seen in second.media] == ["image", "document"]
    assert first.media[0].data == second.media[0].data == PICTURE
    # Read once for the turn: the picture and the PDF (a Claude with vision needs no extracted text).
    assert sorted(source.reads) == sorted([photo.sha256, pdf_part().sha256])


async def test_a_file_no_longer_kept_is_a_stand_in(claude: AnthropicProvider, model_server: ModelServer, tmp_path: Path) -> None:
    photo = image_part(PICTURE, 64, 40)
    await turn_with(make_agent(claude, tmp_path, MemorySource()), ChatMessage(role="user", content="and this?", media=(photo,)))
    record = model_server.last_request
    assert record.status == 200 and record.media == []
    assert record.messages[-1]["content"][0]["text"] == standin(photo, "no longer kept")
    assert SENT_TEXT in record.messages[-1]["content"][0]["text"]


async def test_without_a_media_source_every_part_is_a_stand_in(
    claude: AnthropicProvider, model_server: ModelServer, tmp_path: Path
) -> None:
    await turn_with(make_agent(claude, tmp_path, None), ChatMessage(role="user", content="see?", media=(text_part(),)))
    assert "no longer kept" in model_server.last_request.messages[-1]["content"][0]["text"]


async def test_a_model_without_vision_reads_no_picture_and_says_so(
    claude: AnthropicProvider, model_server: ModelServer, tmp_path: Path
) -> None:
    source = MemorySource(PICTURE)
    agent = make_agent(claude, tmp_path, source, vision=False)
    session = agent.open_session(session_id="S1", platform="telegram", memory=None)
    assert agent.vision is False and session.vision is False
    await turn_with(agent, ChatMessage(role="user", content="see?", media=(image_part(PICTURE, 64, 40),)))
    assert model_server.last_request.media == [] and source.reads == []
    assert "this model cannot see images" in model_server.last_request.messages[-1]["content"][0]["text"]


def loaded_config(home: Path, server: ModelServer, model: dict) -> object:
    config = {"model": {"api_key": "test", "base_url": server.base_url, **model}, "logging": {"console": False}}
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return load_config(home / "config.yaml", {"SWITCHBOARD_HOME": str(home)}, create_home=True)


@pytest.mark.parametrize(
    ("model", "vision"),
    [
        ({"provider": "anthropic", "name": "claude-sonnet-4-6"}, True),
        ({"provider": "openai", "name": "llama3.1"}, False),
        ({"provider": "openai", "name": "llama3.1", "vision": True}, True),
        ({"provider": "openai", "name": "gpt-4o", "vision": False}, False),
    ],
    ids=["claude-by-table", "unknown-name", "configured-on", "configured-off"],
)
async def test_the_gateway_learns_whether_the_main_model_sees_images(
    model: dict, vision: bool, model_server: ModelServer, tmp_path: Path
) -> None:
    agent = build_agent(loaded_config(tmp_path / "home", model_server, model), media=MemorySource())  # type: ignore[arg-type]
    try:
        assert agent.open_session(session_id="S", platform="telegram", memory=None).vision is vision
    finally:
        await agent.aclose()


async def test_a_fallback_configured_without_vision_is_sent_stand_ins(model_server: ModelServer, tmp_path: Path) -> None:
    model = {"provider": "anthropic", "name": "claude-sonnet-4-6",
             "fallbacks": [{"provider": "anthropic", "name": "claude-haiku-4-5", "api_key": "test",
                            "base_url": model_server.base_url, "vision": False}]}  # fmt: skip
    source = MemorySource(PICTURE)
    agent = build_agent(loaded_config(tmp_path / "home", model_server, model), media=source)  # type: ignore[arg-type]
    model_server.responder = lambda record: Text("fallback here") if record.model == "claude-haiku-4-5" else AuthFailed()
    try:
        await turn_with(agent, ChatMessage(role="user", content="see?", media=(image_part(PICTURE, 64, 40),)))
    finally:
        await agent.aclose()
    fallback = model_server.last_request
    assert fallback.model == "claude-haiku-4-5" and fallback.status == 200 and fallback.media == []
    assert "this model cannot see images" in fallback.messages[-1]["content"][0]["text"]
    assert [seen.wire for seen in model_server.requests[0].media] == ["image"]


def test_a_picture_is_counted_by_its_pixels_never_by_its_bytes() -> None:
    small = ChatMessage(role="user", content="", media=(image_part(PICTURE, 1000, 1000, size=40_000),))
    large = ChatMessage(role="user", content="", media=(image_part(PICTURE, 1000, 1000, size=9_000_000),))
    base = estimate_message(ChatMessage.user(""))
    assert estimate_message(small) == estimate_message(large)
    cost = estimate_message(small) - base
    assert cost - 1334 in range(0, 5)  # Anthropic: 1000 x 1000 / 750 = 1333.3, plus a block's framing
    # OpenAI counts tiles: 1000 x 1000 -> 768 x 768 -> 4 tiles of 512 -> 85 + 4 x 170.
    openai = estimate_message(small, style="openai") - base
    assert openai - 765 in range(0, 5)
    # A model without vision is sent a one-line stand-in, and that is what it costs.
    blind = estimate_message(small, vision=False) - base
    assert blind == estimate_text(standin(small.media[0], "not shown: this model cannot see images"))


def test_a_pdf_is_counted_by_its_pages_and_text() -> None:
    report = ChatMessage(role="user", content="", media=(pdf_part(pages=3, text_tokens=900),))
    base = estimate_message(ChatMessage.user(""))
    assert estimate_message(report) - base - (900 + 3 * 1600) in range(0, 5)
    assert estimate_message(report, style="openai") - base - 900 in range(0, 5)


def test_a_session_estimates_as_its_main_model_counts(tmp_path: Path) -> None:
    class Named(AnthropicProvider):
        name = "openai"

    router = ModelRouter([ModelTarget(Named(api_key="x"), "gpt-4o", CachePolicy(False, False))])
    agent = Agent(AgentSettings(home=tmp_path), router)
    photo = ChatMessage(role="user", content="", media=(image_part(PICTURE, 1000, 1000),))
    assert agent.estimate(photo) == estimate_message(photo, style="openai")


async def test_files_a_request_leaves_out_are_not_read(claude: AnthropicProvider, model_server: ModelServer, tmp_path: Path) -> None:
    pictures = [png(8, 8 + index) for index in range(102)]
    source = MemorySource(*pictures)
    history = []
    for index, data in enumerate(pictures):
        history += [ChatMessage(role="user", content=f"photo {index}", media=(image_part(data, 8, 8 + index),)),
                    ChatMessage.assistant(f"seen {index}")]  # fmt: skip
    await turn_with(make_agent(claude, tmp_path, source), *history, ChatMessage.user("which was the first?"))
    assert model_server.last_request.status == 200 and len(model_server.last_request.media) == 100
    assert sorted(source.reads) == sorted(image_part(data, 8, 8).sha256 for data in pictures[2:])


def test_openai_tiles_are_counted_on_whole_pixels_as_the_api_resizes() -> None:
    # A downscaled phone photo (1238 x 928) is resized by the API to 1024 x 768: 2 x 2 tiles. Scaling on
    # fractions made it 1024.6 wide, 3 x 2 tiles, 44% over what the API bills (bench.media found it).
    assert image_tokens(1238, 928, "openai") == 85 + 170 * 4
    assert image_tokens(4032, 3024, "openai") == 85 + 170 * 4
