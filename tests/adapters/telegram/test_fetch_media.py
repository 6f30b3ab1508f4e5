"""Downloading a file a user sent: ``getFile`` through aiogram, then the file URL on the configured API base.

Real aiogram and real HTTP against the emulator, whose files can misbehave: a size over the
limit is refused before anything is downloaded (by the message's claim, by getFile's, or by
Telegram's own "file is too big"), a 404 is ``gone``, a redirect to another host is refused
unfetched, a download that never answers times out, and the bot token (part of the file URL)
never shows in a log line or an error.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.contract import Attachment, MediaUnavailable
from adapters.telegram import TelegramAdapter
from tests.adapters.telegram.conftest import ALICE, Listening
from tests.fakes.telegram_api import Fault, Rendition, TelegramAPI

LIMIT = 10_000
TIMEOUT = 30.0
"""Seconds a download may take in these tests: only a hung one comes near it (those pass their own)."""
EMULATOR_LOGGERS = ("aiohttp.access", "aiohttp.server", "aiohttp.web")
"""The emulator's own HTTP server logs (Telegram's side, which sees the token in every request path)."""


async def fetch(adapter: TelegramAdapter, attachment: Attachment, *, max_bytes: int = LIMIT,
                timeout: float = TIMEOUT) -> bytes:  # fmt: skip
    return await adapter.fetch_media(attachment, max_bytes=max_bytes, timeout=timeout)


async def refused(adapter: TelegramAdapter, attachment: Attachment, **limits: Any) -> MediaUnavailable:
    with pytest.raises(MediaUnavailable) as caught:
        await fetch(adapter, attachment, **limits)
    return caught.value


async def document_sent(api: TelegramAPI, listening: Listening, data: bytes, fault: Fault | None = None) -> Attachment:
    """Alice sends ``data`` as a document; the attachment the adapter made of it."""
    await api.send_document(ALICE, "notes.txt", "text/plain", data=data, fault=fault)
    [message] = await listening.next()
    return message.attachments[0]


def unclaimed(api: TelegramAPI, data: bytes, *, size: int | None = -1, fault: Fault | None = None) -> Attachment:
    """A document whose message claims no size (Telegram's ``file_size`` is optional); getFile claims ``size``."""
    return Attachment(kind="document", ref=api.add_file(data, size=size, fault=fault))


async def test_a_document_and_each_size_of_a_photo_are_downloaded_from_the_configured_api_base(
    telegram_api: TelegramAPI, listening: Listening
) -> None:
    data = bytes(range(256)) * 30
    document = await document_sent(telegram_api, listening, data)
    assert await fetch(listening.adapter, document) == data

    sizes = (Rendition(b"small" * 10, 90, 60), Rendition(b"large" * 1000, 1280, 853))
    await telegram_api.send_photo(ALICE, "look", sizes=sizes)
    [message] = await listening.next()
    [photo] = message.attachments
    assert await fetch(listening.adapter, photo) == sizes[1].data
    assert await fetch(listening.adapter, photo.smaller[0]) == sizes[0].data
    assert len(telegram_api.calls_to("getFile")) == 3 and len(telegram_api.file_requests) == 3


async def test_a_redirect_within_the_api_host_is_followed(telegram_api: TelegramAPI, listening: Listening) -> None:
    attachment = unclaimed(telegram_api, b"moved bytes", fault=Fault.MOVED)
    assert await fetch(listening.adapter, attachment) == b"moved bytes"


async def test_a_file_claimed_over_the_limit_in_the_message_is_refused_before_getfile(
    telegram_api: TelegramAPI, listening: Listening
) -> None:
    attachment = await document_sent(telegram_api, listening, b"x" * (LIMIT + 1))
    error = await refused(listening.adapter, attachment)
    assert error.reason == "too_large"
    assert telegram_api.calls_to("getFile") == [] and telegram_api.file_requests == []


async def test_a_file_getfile_claims_over_the_limit_is_refused_without_downloading(
    telegram_api: TelegramAPI, listening: Listening
) -> None:
    error = await refused(listening.adapter, unclaimed(telegram_api, b"x" * (LIMIT + 1)))
    assert error.reason == "too_large" and f"{LIMIT:,}" in str(error)
    assert len(telegram_api.calls_to("getFile")) == 1 and telegram_api.file_requests == []


async def test_telegrams_file_is_too_big_is_too_large(telegram_api: TelegramAPI, listening: Listening) -> None:
    error = await refused(listening.adapter, unclaimed(telegram_api, b"x" * 100, size=None, fault=Fault.TOO_BIG))
    assert error.reason == "too_large" and "20 MB" in str(error)
    assert telegram_api.file_requests == []


async def test_a_body_longer_than_claimed_stops_at_the_limit(telegram_api: TelegramAPI, listening: Listening) -> None:
    attachment = unclaimed(telegram_api, b"x" * (LIMIT * 5), size=100, fault=Fault.UNSIZED)
    assert (await refused(listening.adapter, attachment)).reason == "too_large"


@pytest.mark.parametrize(("fault", "reason"), [
    (Fault.MISSING, "gone"),         # the download answers 404
    (Fault.UNAVAILABLE, "gone"),     # getFile: "wrong file_id or the file is temporarily unavailable"
    (Fault.SHORT, "failed"),         # the connection ends before the announced length
])  # fmt: skip
async def test_a_failed_download_says_why(
    telegram_api: TelegramAPI, listening: Listening, fault: Fault, reason: str
) -> None:
    error = await refused(listening.adapter, unclaimed(telegram_api, b"y" * 500, fault=fault))
    assert error.reason == reason


async def test_a_redirect_to_another_host_is_refused_unfetched(telegram_api: TelegramAPI, listening: Listening) -> None:
    error = await refused(listening.adapter, unclaimed(telegram_api, b"z" * 10, fault=Fault.REDIRECT))
    assert error.reason == "redirect"
    assert len(telegram_api.file_requests) == 1 and telegram_api.elsewhere_requests == []


async def test_a_download_that_never_answers_times_out(telegram_api: TelegramAPI, listening: Listening) -> None:
    error = await refused(listening.adapter, unclaimed(telegram_api, b"h" * 10, fault=Fault.HANG), timeout=0.5)
    assert error.reason == "timeout"
    assert telegram_api.file_requests  # it was asked for, and did not answer


async def test_the_bot_token_never_shows_in_logs_or_errors(
    telegram_api: TelegramAPI, listening: Listening, caplog: pytest.LogCaptureFixture
) -> None:
    failures = [Fault.MISSING, Fault.UNAVAILABLE, Fault.TOO_BIG, Fault.REDIRECT, Fault.SHORT, Fault.HANG]
    errors: list[MediaUnavailable] = []
    caplog.set_level(logging.DEBUG)
    with capture_logs() as logs:
        assert await fetch(listening.adapter, unclaimed(telegram_api, b"fine")) == b"fine"
        for fault in failures:
            errors.append(await refused(listening.adapter, unclaimed(telegram_api, b"bad", fault=fault), timeout=1.0))
        await listening.adapter.close()
        errors.append(await refused(listening.adapter, unclaimed(telegram_api, b"after close")))

    assert [e.reason for e in errors] == ["gone", "gone", "too_large", "redirect", "failed", "timeout", "failed"]
    secret = telegram_api.token.partition(":")[2]
    ours = [record.getMessage() for record in caplog.records if not record.name.startswith(EMULATOR_LOGGERS)]
    written = [str(logs), *ours] + ["".join(traceback.format_exception(error)) for error in errors]
    assert not [text for text in written if secret in text]

