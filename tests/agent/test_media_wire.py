"""Pictures and documents on the wire: through the real anthropic and openai SDKs to the fake model server."""

from __future__ import annotations

import json
from collections.abc import Mapping

from agent.caching import CachePolicy
from agent.media import MediaPart
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import to_anthropic
from agent.providers.base import ModelRequest, Provider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from tests.agent.media_support import NOTES, PDF, PDF_TEXT, SENT_TEXT, image_part, pdf_part, png, sha, text_part
from tests.agent.sdk_providers import build
from tests.fakes.model_server import ModelServer, ServerError, Text

PICTURE = png(64, 40)
FILES = {sha(PICTURE): PICTURE, sha(PDF): PDF, sha(PDF_TEXT.encode()): PDF_TEXT.encode(), sha(NOTES.encode()): NOTES.encode()}


def ask(provider: Provider, *parts: MediaPart, text: str = "what is wrong here?", **fields: object) -> ModelRequest:
    model = "claude-sonnet-4-6" if provider.name == "anthropic" else "gpt-4o"
    message = ChatMessage(role="user", content=text, media=parts)
    fields.setdefault("media", FILES)
    return ModelRequest(model=model, system="You are a test.", messages=[message], **fields)  # type: ignore[arg-type]


def last_content(server: ModelServer) -> list[Mapping]:
    content = server.last_request.messages[-1]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def texts(server: ModelServer) -> str:
    return "\n".join(block.get("text", "") for block in last_content(server))


async def test_a_picture_arrives_before_the_text_as_the_provider_reads_pictures(
    provider: Provider, model_server: ModelServer
) -> None:
    response = await provider.complete(ask(provider, image_part(PICTURE, 64, 40)))
    assert response.message.content.startswith("ok:")
    (seen,) = model_server.last_request.media
    assert seen.media_type == "image/png" and seen.data == PICTURE
    assert seen.wire == ("image" if provider.name == "anthropic" else "image_url")
    assert [block["type"] for block in last_content(model_server)] == [seen.wire, "text"]
    assert last_content(model_server)[-1]["text"] == "what is wrong here?"


async def test_a_pdf_is_a_document_for_claude_and_its_text_elsewhere(provider: Provider, model_server: ModelServer) -> None:
    await provider.complete(ask(provider, pdf_part()))
    if provider.name == "anthropic":
        (seen,) = model_server.last_request.media
        assert (seen.wire, seen.media_type, seen.data) == ("document", "application/pdf", PDF)
        assert seen.block["title"] == "report.pdf" and PDF_TEXT not in texts(model_server)
    else:
        assert model_server.last_request.media == []
        sent = texts(model_server)
        assert PDF_TEXT in sent and "report.pdf" in sent and sent.endswith("what is wrong here?")


async def test_a_text_file_is_its_text_on_both(provider: Provider, model_server: ModelServer) -> None:
    await provider.complete(ask(provider, text_part()))
    assert model_server.last_request.media == []
    sent = texts(model_server)
    assert NOTES in sent and "[end of notes.txt]" in sent
    assert sent.index(NOTES) < sent.index("what is wrong here?")


async def test_a_model_without_vision_gets_a_stand_in_for_the_picture(provider: Provider, model_server: ModelServer) -> None:
    await provider.complete(ask(provider, image_part(PICTURE, 64, 40), pdf_part(), vision=False))
    assert model_server.last_request.media == []  # neither the picture nor the PDF as a document
    sent = texts(model_server)
    assert f"[photo 'screen.png' (64x40, {SENT_TEXT}): not shown: this model cannot see images]" in sent
    assert PDF_TEXT in sent  # a PDF's text needs no vision


async def test_bytes_no_longer_kept_become_a_stand_in(provider: Provider, model_server: ModelServer) -> None:
    await provider.complete(ask(provider, image_part(PICTURE, 64, 40), text_part(), media={}))
    assert model_server.last_request.status == 200 and model_server.last_request.media == []
    sent = texts(model_server)
    assert f"[photo 'screen.png' (64x40, {SENT_TEXT}): no longer kept]" in sent
    assert f"[document 'notes.txt' ({SENT_TEXT}): no longer kept]" in sent


async def test_a_fallback_model_without_vision_gets_stand_ins(model_server: ModelServer) -> None:
    first, second = build("anthropic", model_server), build("openai", model_server)
    router = ModelRouter(
        [ModelTarget(first, "claude-sonnet-4-6", CachePolicy(True, True)),
         ModelTarget(second, "llama3.1", CachePolicy(False, False))],  # not a vision model by the table
        RetryPolicy(max_attempts=1),
    )  # fmt: skip
    model_server.script(ServerError(), Text("answered by the fallback"))
    try:
        response = await router.complete(ask(first, image_part(PICTURE, 64, 40), cache_ttl="5m"))
    finally:
        await first.aclose()
        await second.aclose()
    assert response.message.content == "answered by the fallback"
    main, fallback = model_server.requests
    assert [seen.wire for seen in main.media] == ["image"]
    assert fallback.api == "openai" and fallback.media == []
    assert "not shown: this model cannot see images" in texts(model_server)


async def test_the_breakpoint_sits_on_the_text_after_the_pictures(model_server: ModelServer) -> None:
    provider = build("anthropic", model_server)
    try:
        await provider.complete(ask(provider, image_part(PICTURE, 64, 40), cache_ttl="5m", ephemeral="(call-time note)"))
    finally:
        await provider.aclose()
    record = model_server.last_request
    assert record.status == 200
    blocks = last_content(model_server)
    assert [block["type"] for block in blocks] == ["image", "text", "text"]
    assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == {"type": "ephemeral"}
    assert blocks[1]["text"] == "what is wrong here?"
    assert blocks[2] == {"type": "text", "text": "(call-time note)"}  # outside the marked block


async def test_a_photo_without_a_caption_still_takes_a_valid_breakpoint(model_server: ModelServer) -> None:
    provider = build("anthropic", model_server)
    history = [
        ChatMessage(role="user", content="", media=(image_part(PICTURE, 64, 40),)),
        ChatMessage.assistant("I see a grey rectangle."),
        ChatMessage(role="user", content="  ", media=(image_part(PICTURE, 64, 40, name="again.png"),)),
    ]
    request = ModelRequest(model="claude-sonnet-4-6", system="You are a test.", messages=history, media=FILES,
                           cache_ttl="5m", ephemeral="(call-time note)")  # fmt: skip
    try:
        await provider.complete(request)
    finally:
        await provider.aclose()
    record = model_server.last_request
    assert record.status == 200  # no blank text block, no more than four breakpoints
    assert [seen.cache_control for seen in record.media] == [{"type": "ephemeral"}, {"type": "ephemeral"}]
    last = record.messages[-1]["content"]
    assert [block["type"] for block in last] == ["image", "text"]
    assert last[1] == {"type": "text", "text": "(call-time note)"}
    # Sent again, the marked prefix is read from cache: the blocks did not change between calls.
    again = ModelRequest(model="claude-sonnet-4-6", system="You are a test.", messages=history, media=FILES,
                         cache_ttl="5m", ephemeral="(another note)")  # fmt: skip
    provider = build("anthropic", model_server)
    try:
        await provider.complete(again)
    finally:
        await provider.aclose()
    assert model_server.last_request.cache_read > 0


async def test_through_an_openai_style_envelope_a_picture_takes_no_breakpoint(model_server: ModelServer) -> None:
    provider = build("openai", model_server)
    history = [ChatMessage.user("first"), ChatMessage.assistant("ok"),
               ChatMessage(role="user", content="", media=(image_part(PICTURE, 64, 40),))]  # fmt: skip
    request = ModelRequest(model="anthropic/claude-sonnet-4", system="You are a test.", messages=history,
                           media=FILES, cache_ttl="5m", cache_native=False)  # fmt: skip
    try:
        await provider.complete(request)
    finally:
        await provider.aclose()
    body = json.dumps(model_server.last_request.messages)
    (seen,) = model_server.last_request.media
    assert seen.cache_control is None and body.count("cache_control") == 3  # system, first, ok


async def test_a_long_photo_conversation_keeps_within_the_pictures_a_request_may_carry(model_server: ModelServer) -> None:
    pictures = [png(8, 8 + index) for index in range(102)]
    history = []
    for index, data in enumerate(pictures):
        history += [ChatMessage(role="user", content=f"photo {index}", media=(image_part(data, 8, 8 + index),)),
                    ChatMessage.assistant(f"seen {index}")]  # fmt: skip
    history.append(ChatMessage.user("which was the first?"))
    provider = build("anthropic", model_server)
    request = ModelRequest(model="claude-sonnet-4-6", system="You are a test.", messages=history,
                           media={sha(data): data for data in pictures})  # fmt: skip
    try:
        await provider.complete(request)
    finally:
        await provider.aclose()
    record = model_server.last_request
    assert record.status == 200
    assert [seen.data for seen in record.media] == pictures[2:]  # the newest hundred
    first = record.messages[0]["content"]
    assert first[0]["text"].endswith("left out of this request to keep it within the API's limits]")


def test_files_past_the_request_size_are_left_out_oldest_first() -> None:
    reports = [PDF + bytes([index]) * 8_000_000 for index in range(3)]  # 24 MB: more than one request takes
    history = [ChatMessage(role="user", content=f"report {index}", media=(pdf_part(sha256=sha(data), size=len(data)),))
               for index, data in enumerate(reports)]  # fmt: skip
    request = ModelRequest(model="claude-sonnet-4-6", system="You are a test.", messages=history,
                           media={sha(data): data for data in reports})  # fmt: skip
    params = to_anthropic(request)
    documents = [[block["type"] for block in turn["content"]] for turn in params["messages"]]
    assert documents == [["text", "text", "document", "text", "document", "text"]]  # one merged user turn
    assert "left out of this request" in params["messages"][0]["content"][0]["text"]
    assert len(json.dumps(params)) < 32_000_000  # Anthropic's limit on a request
