"""Files users send on Discord: what the adapter says about them, and downloading them from the CDN.

Real discord.py parses the emulator's MESSAGE_CREATE; ``fetch_media`` downloads the attachment's URL
from the emulator's CDN path (the configured API base's site) with the adapter's own HTTP session.
"""

from __future__ import annotations

import pytest

from adapters.contract import Attachment, MediaUnavailable
from adapters.discord import DiscordAdapter
from tests.adapters.discord.conftest import ALICE, Collected
from tests.fakes.discord_api import DiscordEmulator, payloads
from tests.fakes.other_site import OtherSite

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
PDF = b"%PDF-1.7\n" + b"x" * 300
OGG = b"OggS" + b"\x01" * 120
LIMIT = 1_000_000


def collected(adapter: DiscordAdapter) -> Collected:
    intake = adapter._intake
    assert isinstance(intake, Collected)
    return intake


async def sent_alone(emulator: DiscordEmulator, adapter: DiscordAdapter, item: dict) -> Attachment:
    """The attachment as the adapter hands it over, after a user sent ``item`` in a DM."""
    await emulator.dm(ALICE, "see this", attachments=[item])
    (message,) = await collected(adapter).wait(1)
    (attachment,) = message.attachments
    return attachment


async def failure(
    adapter: DiscordAdapter, attachment: Attachment, *, max_bytes: int = LIMIT, timeout: float = 30
) -> MediaUnavailable:
    """What ``fetch_media`` raised (it must raise)."""
    with pytest.raises(MediaUnavailable) as failed:
        await adapter.fetch_media(attachment, max_bytes=max_bytes, timeout=timeout)
    return failed.value


async def test_attachments_say_where_they_are_and_how_big(emulator: DiscordEmulator, adapter: DiscordAdapter) -> None:
    photo = emulator.attachment(PNG, "screenshot.png", content_type="image/png", width=1920, height=1080)
    document = emulator.attachment(PDF, "report.pdf", content_type="application/pdf")
    unknown = emulator.attachment(b"\x00\x01", "blob.bin")
    await emulator.dm(ALICE, "look", attachments=[photo, document, unknown])
    await emulator.voice_message(ALICE, OGG, duration=7.5)
    first, voice = await collected(adapter).wait(2)
    assert first.attachments == (
        Attachment(kind="photo", name="screenshot.png", mime_type="image/png", size=len(PNG), ref=photo["id"],
                   url=photo["url"], width=1920, height=1080),
        Attachment(kind="document", name="report.pdf", mime_type="application/pdf", size=len(PDF),
                   ref=document["id"], url=document["url"]),
        Attachment(kind="file", name="blob.bin", size=2, ref=unknown["id"], url=unknown["url"]),
    )  # fmt: skip
    (recording,) = voice.attachments
    assert (recording.kind, recording.duration, recording.mime_type) == ("voice", 7.5, "audio/ogg")


async def test_fetch_media_downloads_the_attachment_from_the_cdn(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    photo = await sent_alone(emulator, adapter, emulator.attachment(PNG, "cat.png", content_type="image/png"))
    assert await adapter.fetch_media(photo, max_bytes=LIMIT, timeout=30) == PNG
    (download,) = emulator.files.downloads_of(photo.ref or "")
    assert "Authorization" not in download.headers  # the CDN needs no token, so none is sent


async def test_a_voice_message_is_downloaded_too(emulator: DiscordEmulator, adapter: DiscordAdapter) -> None:
    await emulator.voice_message(ALICE, OGG, duration=3.0)
    (message,) = await collected(adapter).wait(1)
    assert await adapter.fetch_media(message.attachments[0], max_bytes=LIMIT, timeout=30) == OGG


async def test_a_file_over_the_limit_by_discords_claim_is_refused_without_downloading(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    big = await sent_alone(emulator, adapter, emulator.attachment(PNG, "huge.png", size=50_000_000))
    refused = await failure(adapter, big)
    assert refused.reason == "too_large" and "50000000" in str(refused)
    assert emulator.files.downloads == []


async def test_a_file_larger_than_claimed_stops_at_the_limit(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    liar = await sent_alone(emulator, adapter, emulator.attachment(b"x" * 5000, "small.txt", size=10))
    assert (await failure(adapter, liar, max_bytes=1000)).reason == "too_large"


@pytest.mark.parametrize(("trouble", "reason"), [("missing", "gone"), ("hang", "timeout"), ("cut_short", "failed")])
async def test_a_download_that_goes_wrong_says_how(
    emulator: DiscordEmulator, adapter: DiscordAdapter, trouble: str, reason: str
) -> None:
    """404 (deleted, or the signed address expired): gone; no answer in time: timeout; a body that ends before
    its length: failed."""
    item = emulator.attachment(PDF, "trouble.pdf", content_type="application/pdf")
    getattr(emulator.files, trouble)(item["id"])
    attachment = await sent_alone(emulator, adapter, item)
    assert (await failure(adapter, attachment, timeout=0.5 if trouble == "hang" else 30)).reason == reason


async def test_a_redirect_to_another_site_is_not_followed(
    emulator: DiscordEmulator, adapter: DiscordAdapter, other_site: OtherSite
) -> None:
    item = emulator.attachment(PNG, "moved.png", content_type="image/png")
    emulator.files.redirect(item["id"], other_site.url("/elsewhere.png"))
    assert (await failure(adapter, await sent_alone(emulator, adapter, item))).reason == "redirect"
    assert other_site.requests == []


async def test_an_attachment_url_off_discords_cdn_is_never_fetched(
    emulator: DiscordEmulator, adapter: DiscordAdapter, other_site: OtherSite
) -> None:
    url = other_site.url("/attachments/1/2/cat.png")
    item = payloads.attachment("cat.png", size=100, content_type="image/png", url=url)
    refused = await failure(adapter, await sent_alone(emulator, adapter, item))
    assert refused.reason == "refused" and "127.0.0.2" in str(refused)
    assert other_site.requests == []
