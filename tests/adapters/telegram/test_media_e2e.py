"""Files users send on Telegram, end to end: real aiogram against the emulator, the real gateway (its media
step and pipeline), the real anthropic SDK against the fake model server, the fake transcription endpoint.

Each test sends what a Telegram user sends (a photo in its renditions, an album, a document, a voice
note) and reads what the model was given and what the user saw.
"""

from __future__ import annotations

import io
import os
import time
from typing import Any

import pytest
from PIL import Image
from structlog.testing import capture_logs

from agent import ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS
from tests.adapters.telegram.conftest import ALICE, StartTelegram, TelegramRun
from tests.fakes import media_files
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.model_server.records import RequestRecord
from tests.fakes.telegram_api import Document, Fault, Rendition, TelegramAPI
from tests.gateway.conftest import settled
from tests.waiting import eventually

ANSWER = "Here is my answer."
NO_VISION = "The model I use here cannot see pictures"


def answers(model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text(ANSWER)


def photo(width: int, height: int) -> tuple[Rendition, ...]:
    """A photo as Telegram sends it: its smaller sizes (90 and 1280 px wide, those below its own) and the
    original, smallest first."""
    smaller = [(edge, round(edge * height / width)) for edge in (90, 1280) if edge < width]
    return (*(Rendition(media_files.jpeg(*size), *size) for size in smaller),
            Rendition(media_files.jpeg(width, height), width, height))  # fmt: skip


def user_content(record: RequestRecord, index: int = -1) -> list[dict[str, Any]]:
    """The content blocks of a user message in a request (the last one by default)."""
    content = [m for m in record.messages if m["role"] == "user"][index]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def words(record: RequestRecord, index: int = -1) -> str:
    return "\n".join(block["text"] for block in user_content(record, index) if block["type"] == "text")


def transcription(model_server: ModelServer) -> dict[str, Any]:
    return {"transcription": {"base_url": f"{model_server.base_url}/v1", "api_key": "test", "model": "whisper-1"}}


def rejected(logs: list[dict[str, Any]]) -> list[str]:
    return [entry["reason"] for entry in logs if entry["event"] == "media.rejected"]


async def test_a_photo_with_its_caption_reaches_the_model_as_one_downscaled_picture(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    run = await start_telegram()
    await telegram_api.send_photo(ALICE, "what is wrong in this screenshot?", sizes=photo(3000, 2000))

    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == ANSWER
    [request] = model_server.requests
    [image] = request.media
    assert (image.wire, image.media_type) == ("image", "image/jpeg")
    width, height = Image.open(io.BytesIO(image.data)).size
    # From the original (the 1280 px rendition has fewer pixels than the model takes), downscaled to the
    # provider's size, the aspect ratio kept.
    assert 1280 < width <= ANTHROPIC_MAX_EDGE and width * height <= ANTHROPIC_MAX_PIXELS
    assert abs(width / height - 1.5) < 0.01
    blocks = user_content(request)
    assert blocks[0]["type"] == "image" and "what is wrong in this screenshot?" in words(request)
    # Kept in the home's media folder, private, and referred to from the stored message.
    [session] = await run.store.list_sessions()
    [stored] = [m for m in await run.store.load_messages(session.id) if m.role == "user"]
    [part] = stored.media
    kept = run.home / "media" / part["sha256"][:2] / part["sha256"]
    assert kept.read_bytes() == image.data and (kept.stat().st_mode & 0o777) == 0o600
    assert (part["kind"], part["width"], part["height"]) == ("image", width, height)


async def test_an_album_is_one_turn_with_every_photo(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    await start_telegram(sessions={"debounce_ms": 0})
    await telegram_api.send_album(ALICE, [photo(800, 600), photo(600, 800), photo(640, 640)], caption="which is best?")

    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == ANSWER
    [request] = model_server.requests
    assert [Image.open(io.BytesIO(m.data)).size for m in request.media] == [(800, 600), (600, 800), (640, 640)]
    assert "which is best?" in words(request)


async def test_a_voice_note_is_transcribed_into_the_users_words(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    model_server.transcription.script("remind me to water the plants tomorrow")
    await start_telegram(media=transcription(model_server))
    await telegram_api.send_voice(ALICE, data=media_files.ogg_opus(4.0), duration=4)

    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == ANSWER
    [request] = model_server.requests
    assert "[voice note, transcribed]: remind me to water the plants tomorrow" in words(request)
    assert "automatic transcripts" in words(request)  # told at call time, so it can say what it understood
    assert not request.media
    heard = model_server.transcription.last
    assert (heard.model, heard.size) == ("whisper-1", len(media_files.ogg_opus(4.0)))


async def test_without_transcription_a_voice_note_is_answered_in_one_line_without_a_model_call(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    run = await start_telegram()
    with capture_logs() as logs:
        await telegram_api.send_voice(ALICE, data=media_files.ogg_opus(4.0), duration=4)
        [reply] = await telegram_api.wait_sent(1)
        await settled(run.store)
    assert reply.visible == "I couldn't use your voice note: voice messages are not supported here."
    assert not model_server.requests
    assert rejected(logs) == ["no_transcription"]
    assert run.gateway.metrics.registry.get_sample_value(
        "switchboard_media_total", {"platform": "telegram", "kind": "voice", "outcome": "no_transcription"}
    ) == 1  # fmt: skip


BAD_INPUTS = [
    pytest.param("document", Document(media_files.truncated(media_files.jpeg(1200, 900)), "broken.jpg", "image/jpeg"),
                 "corrupt", id="truncated image"),
    pytest.param("document", Document(media_files.png_bomb(), "bomb.png", "image/png"), "bomb", id="png bomb"),
    pytest.param("document", Document(media_files.pdf(2000), "huge.pdf", "application/pdf"), "too_many_pages",
                 id="2000-page pdf"),
    pytest.param("audio", Document(media_files.ogg_opus(3 * 3600), "lecture.ogg", "audio/ogg"), "too_long",
                 id="3-hour audio"),
    pytest.param("document", Document(media_files.pdf(1), "gone.pdf", "application/pdf", Fault.MISSING),
                 "download_failed", id="download fails"),
    pytest.param("document", Document(media_files.pdf(1), "slow.pdf", "application/pdf", Fault.HANG),
                 "download_failed", id="download times out"),
    pytest.param("document", Document(media_files.pdf(1), "moved.pdf", "application/pdf", Fault.REDIRECT),
                 "download_failed", id="redirect to another host"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "item", "reason"), BAD_INPUTS)
async def test_a_bad_file_is_told_to_the_user_and_logged_and_the_text_is_still_answered(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, kind: str, item: Document,
    reason: str,
) -> None:  # fmt: skip
    answers(model_server)
    run = await start_telegram(media={"download_timeout": 1, **transcription(model_server)})
    caption = "can you read this?"
    with capture_logs() as logs:
        if kind == "audio":
            # The claim is short; the file itself says three hours.
            await telegram_api.send_audio(ALICE, item.name, data=item.data, duration=60, mime_type=item.mime_type,
                                          caption=caption)  # fmt: skip
        else:
            await telegram_api.send_document(ALICE, item.name, item.mime_type, data=item.data, caption=caption,
                                             fault=item.fault)  # fmt: skip
        notice, answer = await telegram_api.wait_sent(2)
        await settled(run.store)
    # The user hears which file and why, first; then the answer to the words.
    assert notice.visible.startswith(f"I couldn't use {item.name}: "), notice.visible
    assert answer.visible == ANSWER
    assert rejected(logs) == [reason]
    [request] = model_server.requests
    assert not request.media and not model_server.transcription.requests
    assert caption in words(request) and f"[{item.name} could not be used: " in words(request)
    assert not telegram_api.elsewhere_requests  # a redirect to another host is never followed


async def test_a_model_without_vision_gets_a_stand_in_and_the_user_is_told_once_even_across_a_restart(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    run = await start_telegram(model={"vision": False})
    await telegram_api.send_photo(ALICE, "what is this?", sizes=photo(800, 600))
    told, first = await telegram_api.wait_sent(2)
    assert told.visible.startswith(NO_VISION) and first.visible == ANSWER
    [request] = model_server.requests
    assert not request.media and "this model cannot see images" in words(request)

    await telegram_api.send_photo(ALICE, "and this one?", sizes=photo(640, 480))
    await telegram_api.wait_sent(3)
    await settled(run.store)
    await run.gateway.shutdown()
    await start_telegram(model={"vision": False})
    await telegram_api.send_photo(ALICE, "one more", sizes=photo(500, 500))
    await telegram_api.wait_sent(4)
    assert [m.visible for m in telegram_api.sent][2:] == [ANSWER, ANSWER]
    assert len(model_server.requests) == 3

    # A photo alone is nothing this model can use: the notice answers it, and the model is not asked.
    await telegram_api.send_photo(ALICE, sizes=photo(500, 500))
    [alone] = (await telegram_api.wait_sent(5))[4:]
    assert NO_VISION in alone.visible and len(model_server.requests) == 3


async def test_after_retention_an_old_photo_reaches_the_model_as_a_stand_in(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    answers(model_server)
    run = await start_telegram(media={"retention_days": 30})
    await telegram_api.send_photo(ALICE, "remember this chart", sizes=photo(800, 600))
    await telegram_api.wait_sent(1)
    await settled(run.store)
    await run.gateway.shutdown()
    kept = [path for path in (run.home / "media").rglob("*") if path.is_file()]
    assert kept
    month_ago = time.time() - 31 * 24 * 3600
    for path in kept:
        os.utime(path, (month_ago, month_ago))

    with capture_logs() as logs:
        again: TelegramRun = await start_telegram(media={"retention_days": 30})
        await eventually(lambda: any(e["event"] == "media.pruned" for e in logs), "the media folder to be pruned")
    [pruned] = [e for e in logs if e["event"] == "media.pruned"]
    assert pruned["files"] == len(kept) and pruned["bytes"] > 0
    await telegram_api.say(ALICE, "what did the chart show?")
    await telegram_api.wait_sent(2)
    await settled(again.store)
    old_turn = model_server.requests[-1]
    assert not old_turn.media
    assert "no longer kept" in words(old_turn, -2) and "remember this chart" in words(old_turn, -2)
