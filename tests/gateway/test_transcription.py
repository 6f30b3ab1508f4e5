"""Voice notes transcribed through the real openai SDK against the fake model server's
``/v1/audio/transcriptions``: what is sent, what comes back, and every way it fails (a clear
``MediaRejected`` for the user, a ``media.transcription_failed`` log line without the audio or the key)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from config.media import TranscriptionConfig
from gateway.media.errors import MediaRejected
from gateway.media.transcribe import Transcriber
from tests.fakes.model_server import ModelServer
from tests.fakes.model_server.transcription import SpeechFailure, SpeechHang

KEY = "sk-transcription-test-key-0123456789"
VOICE = b"OggS\x00\x02" + bytes(range(256)) * 40  # the fake endpoint does not decode it
"""A stand-in for a Telegram voice note's bytes."""


def settings(server: ModelServer, **overrides: Any) -> TranscriptionConfig:
    values: dict[str, Any] = {"model": "whisper-1", "base_url": f"{server.base_url}/v1", "api_key": KEY}
    return TranscriptionConfig(**{**values, **overrides})


@pytest_asyncio.fixture
async def transcriber(model_server: ModelServer) -> AsyncIterator[Transcriber]:
    model_server.transcription.api_key = KEY
    made = Transcriber(settings(model_server))
    yield made
    await made.aclose()


def failures(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "media.transcription_failed"]


async def fails(transcriber: Transcriber, data: bytes = VOICE) -> tuple[MediaRejected, dict[str, Any]]:
    """The rejection a transcription ends in, and its one log line (checked for the audio and the key)."""
    with capture_logs() as logs, pytest.raises(MediaRejected) as caught:
        await transcriber.transcribe(data, mime="audio/ogg", name=None)
    assert caught.value.reason == "transcription_failed"
    (line,) = failures(logs)
    assert KEY not in repr(logs) and "OggS" not in repr(logs), "the log holds neither the key nor the audio"
    return caught.value, line


async def test_a_voice_note_comes_back_as_its_transcript(model_server: ModelServer, transcriber: Transcriber) -> None:
    model_server.transcription.script("  Can you check the build log?  ")
    with capture_logs() as logs:
        text = await transcriber.transcribe(VOICE, mime="audio/ogg", name=None)
    assert text == "Can you check the build log?"
    sent = model_server.transcription.last
    assert (sent.model, sent.response_format, sent.language) == ("whisper-1", "json", None)
    assert (sent.filename, sent.content_type, sent.size) == ("voice.ogg", "audio/ogg", len(VOICE))
    assert sent.authorization == f"Bearer {KEY}"
    (done,) = [entry for entry in logs if entry["event"] == "media.transcribed"]
    assert done["chars"] == len(text) and done["attempts"] == 1 and "Can you" not in repr(logs)


async def test_the_language_and_the_platforms_file_name_are_sent(model_server: ModelServer) -> None:
    transcriber = Transcriber(settings(model_server, language="de", model="gpt-4o-mini-transcribe"))
    try:
        await transcriber.transcribe(VOICE, mime="audio/mp4; codecs=mp4a", name="uploads/Memo 12")
    finally:
        await transcriber.aclose()
    sent = model_server.transcription.last
    assert (sent.model, sent.language) == ("gpt-4o-mini-transcribe", "de")
    assert (sent.filename, sent.content_type) == ("Memo 12.m4a", "audio/mp4"), "the name ends as the format is"


async def test_the_key_comes_from_OPENAI_API_KEY_when_the_config_has_none(
    model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment-0123456789")
    transcriber = Transcriber(settings(model_server, api_key=None))
    try:
        await transcriber.transcribe(VOICE, mime="audio/ogg", name="voice.oga")
    finally:
        await transcriber.aclose()
    assert model_server.transcription.last.authorization == "Bearer sk-from-the-environment-0123456789"
    assert model_server.transcription.last.filename == "voice.oga"


async def test_a_local_server_gets_a_key_even_when_none_is_configured(
    model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    transcriber = Transcriber(settings(model_server, api_key=None))
    try:
        assert await transcriber.transcribe(VOICE, mime="audio/ogg", name=None)
    finally:
        await transcriber.aclose()
    assert model_server.transcription.last.authorization == "Bearer not-needed"


async def test_a_500_is_tried_once_more_and_the_second_answer_is_used(
    model_server: ModelServer, transcriber: Transcriber
) -> None:
    model_server.transcription.script(SpeechFailure(500), "second time lucky")
    with capture_logs() as logs:
        assert await transcriber.transcribe(VOICE, mime="audio/ogg", name=None) == "second time lucky"
    assert [sent.status for sent in model_server.transcription.requests] == [500, 200]
    assert [entry["event"] for entry in logs if entry["event"].startswith("media.")] == [
        "media.transcription_retry", "media.transcribed"
    ]  # fmt: skip


async def test_a_second_5xx_fails_without_a_third_try(model_server: ModelServer, transcriber: Transcriber) -> None:
    model_server.transcription.script(SpeechFailure(503), SpeechFailure(502), "never asked for")
    rejected, line = await fails(transcriber)
    assert len(model_server.transcription.requests) == 2
    assert (line["reason"], line["status"], line["attempts"]) == ("server_error", 502, 2)
    assert rejected.user_text.startswith("the transcription service had an error")


async def test_a_hung_endpoint_hits_the_timeout(model_server: ModelServer) -> None:
    transcriber = Transcriber(settings(model_server, timeout=0.5))
    model_server.transcription.script(SpeechHang())
    try:
        rejected, line = await fails(transcriber)
    finally:
        await transcriber.aclose()
    assert line["reason"] == "timeout" and line["attempts"] == 1
    assert len(model_server.transcription.requests) == 1, "the time allowed is spent: no second try"
    assert model_server.transcription.last.status is None, "the client gave up while the request was held"
    assert rejected.user_text == (
        "the transcription service did not answer in time; please try again later, or type your message"
    )


@pytest.mark.parametrize("empty", ["", "   \n "])
async def test_an_empty_transcript_is_a_failure(model_server: ModelServer, transcriber: Transcriber, empty: str) -> None:
    model_server.transcription.script(empty)
    rejected, line = await fails(transcriber)
    assert line["reason"] == "empty"
    assert rejected.user_text == "no speech could be made out in it"


async def test_the_failure_log_line_names_the_reason_endpoint_and_model(
    model_server: ModelServer, transcriber: Transcriber
) -> None:
    model_server.transcription.script(SpeechFailure(400))
    rejected, line = await fails(transcriber)
    assert line["log_level"] == "warning"
    assert line["reason"] == "refused" and line["status"] == 400
    assert line["detail"] == "Audio file might be corrupted or unsupported"
    assert (line["model"], line["endpoint"]) == ("whisper-1", f"127.0.0.1:{model_server.port}")
    assert (line["bytes"], line["mime"]) == (len(VOICE), "audio/ogg")
    assert "could not read this recording" in rejected.user_text


async def test_a_refused_key_is_named_as_the_operators_to_fix(model_server: ModelServer) -> None:
    model_server.transcription.api_key = "sk-the-right-key-0123456789"
    transcriber = Transcriber(settings(model_server))
    try:
        rejected, line = await fails(transcriber)
    finally:
        await transcriber.aclose()
    assert (line["reason"], line["status"]) == ("key_refused", 401)
    assert "operator" in rejected.user_text


async def test_an_endpoint_nobody_listens_on_is_unreachable(model_server: ModelServer) -> None:
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    transcriber = Transcriber(settings(model_server, base_url=closed))
    try:
        rejected, line = await fails(transcriber)
    finally:
        await transcriber.aclose()
    assert line["reason"] == "unreachable" and "ConnectError" in line["detail"]
    assert rejected.user_text.startswith("the transcription service cannot be reached right now")
