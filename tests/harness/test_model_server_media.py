"""The fake model server reads pictures and documents off requests, and counts them as the APIs do."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from tests.fakes.model_server import MEDIA_TOKENS, ModelServer

SMALL, LARGE = b"\x89PNG small", b"\x89PNG " + bytes(range(256)) * 400


def image(data: bytes, media_type: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}}


async def test_anthropic_pictures_and_documents_are_recorded_and_counted_by_item(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                          "data": base64.b64encode(b"%PDF-1.4").decode()}}  # fmt: skip
    counts = []
    for data in (SMALL, LARGE):
        content = [image(data), pdf, {"type": "text", "text": "what is this?"}]
        await claude.messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": content}])
        counts.append(model_server.last_request.prompt_tokens)
    seen = model_server.last_request.media
    assert [(item.wire, item.media_type, item.data) for item in seen] == [
        ("image", "image/png", LARGE), ("document", "application/pdf", b"%PDF-1.4")]  # fmt: skip
    assert counts[0] == counts[1] > 2 * MEDIA_TOKENS  # never by the length of the base64


async def test_anthropic_refuses_a_picture_type_it_does_not_read(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError, match="invalid image source"):
        await claude.messages.create(
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": [image(SMALL, "image/bmp")]}]
        )


async def test_openai_image_url_parts_are_recorded(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    url = "data:image/jpeg;base64," + base64.b64encode(LARGE).decode()
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "and this?"}]
    await gpt.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": content}])  # type: ignore[misc, list-item]
    (seen,) = model_server.last_request.media
    assert (seen.wire, seen.media_type, seen.data, seen.message, seen.position) == ("image_url", "image/jpeg", LARGE, 0, 0)
    assert model_server.last_request.prompt_tokens < MEDIA_TOKENS + 50
