"""Files users share on Slack: what the adapter says about them, and downloading them with the bot token.

Signed Events API requests go into the real slack-bolt app (HTTP mode); ``fetch_media`` downloads
``url_private_download`` from the fake Slack's file path, which answers only the bot token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from adapters.contract import Attachment, InboundMessage, MediaUnavailable
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET
from tests.fakes.other_site import OtherSite
from tests.fakes.slack_api import BOT_TOKEN, BOT_USER_ID, FakeSlack, mention, message, post_signed
from tests.waiting import eventually

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
PDF = b"%PDF-1.7\n" + b"x" * 300
M4A = b"\x00\x00\x00\x20ftypM4A " + b"\x00" * 100
LIMIT = 1_000_000


class Running:
    def __init__(self, adapter: SlackAdapter) -> None:
        self.adapter = adapter
        self.received: list[InboundMessage] = []

    async def intake(self, inbound: InboundMessage) -> None:
        self.received.append(inbound)

    async def shared(self, payload: dict[str, Any]) -> InboundMessage:
        """Post ``payload`` as Slack would; the message the adapter hands over for it."""
        assert (await post_signed(self.adapter.http_url or "", payload, SIGNING_SECRET)).status == 200
        await eventually(lambda: len(self.received) == 1)
        return self.received[0]

    async def failure(self, attachment: Attachment, *, timeout: float = 30) -> MediaUnavailable:
        """What ``fetch_media`` raised (it must raise)."""
        with pytest.raises(MediaUnavailable) as failed:
            await self.adapter.fetch_media(attachment, max_bytes=LIMIT, timeout=timeout)
        return failed.value

    async def shared_file(self, item: dict[str, Any]) -> Attachment:
        inbound = await self.shared(message(DM, ALICE, "see this", subtype="file_share", files=[item]))
        (attachment,) = inbound.attachments
        return attachment


@pytest_asyncio.fixture
async def slack(fake_slack: FakeSlack) -> AsyncIterator[Running]:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    running = Running(adapter)
    await adapter.start(running.intake)
    try:
        yield running
    finally:
        await adapter.close()


async def test_files_on_a_dm_say_where_they_are_and_how_big(slack: Running, fake_slack: FakeSlack) -> None:
    photo = fake_slack.files.hosted(PNG, "screenshot.png", "image/png", width=1600, height=900)
    report = fake_slack.files.hosted(PDF, "report.pdf", "application/pdf")
    clip = fake_slack.files.hosted(M4A, "audio_message.m4a", "audio/mp4", duration_ms=4200, subtype="slack_audio")
    inbound = await slack.shared(message(DM, ALICE, "look", subtype="file_share", files=[photo, report, clip]))
    assert inbound.attachments == (
        Attachment(kind="photo", name="screenshot.png", mime_type="image/png", size=len(PNG), ref=photo["id"],
                   url=photo["url_private_download"], width=1600, height=900),
        Attachment(kind="document", name="report.pdf", mime_type="application/pdf", size=len(PDF), ref=report["id"],
                   url=report["url_private_download"]),
        Attachment(kind="voice", name="audio_message.m4a", mime_type="audio/mp4", size=len(M4A), ref=clip["id"],
                   url=clip["url_private_download"], duration=4.2),
    )  # fmt: skip


async def test_a_mention_with_a_file_brings_it_along(slack: Running, fake_slack: FakeSlack) -> None:
    photo = fake_slack.files.hosted(PNG, "chart.png", "image/png", width=10, height=20)
    inbound = await slack.shared(mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> what is this?", files=[photo]))
    assert (inbound.text, inbound.mentioned) == ("what is this?", True)
    (attachment,) = inbound.attachments
    assert await slack.adapter.fetch_media(attachment, max_bytes=LIMIT, timeout=30) == PNG


async def test_fetch_media_downloads_with_the_bot_token(slack: Running, fake_slack: FakeSlack) -> None:
    report = await slack.shared_file(fake_slack.files.hosted(PDF, "report.pdf", "application/pdf"))
    assert await slack.adapter.fetch_media(report, max_bytes=LIMIT, timeout=30) == PDF
    (download,) = fake_slack.files.served.downloads
    assert download.headers["Authorization"] == f"Bearer {BOT_TOKEN}"


async def test_the_fake_refuses_a_download_without_the_token(fake_slack: FakeSlack) -> None:
    item = fake_slack.files.hosted(PDF, "report.pdf", "application/pdf")
    async with aiohttp.ClientSession() as session, session.get(item["url_private_download"]) as response:
        assert response.status == 403


async def test_a_file_over_the_limit_by_slacks_claim_is_refused_without_downloading(
    slack: Running, fake_slack: FakeSlack
) -> None:
    big = await slack.shared_file(fake_slack.files.hosted(PNG, "huge.png", "image/png", size=40_000_000))
    refused = await slack.failure(big)
    assert refused.reason == "too_large" and "40000000" in str(refused)
    assert fake_slack.files.served.downloads == []


@pytest.mark.parametrize(("trouble", "reason"), [("missing", "gone"), ("hang", "timeout"), ("cut_short", "failed")])
async def test_a_download_that_goes_wrong_says_how(
    slack: Running, fake_slack: FakeSlack, trouble: str, reason: str
) -> None:
    item = fake_slack.files.hosted(PNG, "trouble.png", "image/png")
    getattr(fake_slack.files.served, trouble)(item["id"])
    attachment = await slack.shared_file(item)
    assert (await slack.failure(attachment, timeout=0.5 if trouble == "hang" else 30)).reason == reason


async def test_a_redirect_to_another_site_is_not_followed(
    slack: Running, fake_slack: FakeSlack, other_site: OtherSite
) -> None:
    # What Slack does when the token may not read files (no files:read): off to a sign-in page.
    item = fake_slack.files.hosted(PNG, "moved.png", "image/png")
    fake_slack.files.served.redirect(item["id"], other_site.url("/signin?redir=files-pri"))
    failed = await slack.failure(await slack.shared_file(item))
    assert failed.reason == "redirect" and "files:read" in str(failed)
    assert other_site.requests == []


async def test_a_file_url_on_another_site_gets_no_request_and_no_token(
    slack: Running, fake_slack: FakeSlack, other_site: OtherSite
) -> None:
    item = fake_slack.files.hosted(PNG, "cat.png", "image/png")
    item["url_private_download"] = other_site.url("/files-pri/T0TEAM-F1/download/cat.png")
    refused = await slack.failure(await slack.shared_file(item))
    assert refused.reason == "refused" and "127.0.0.2" in str(refused)
    assert other_site.requests == []


async def test_a_file_kept_outside_slack_cannot_be_read_and_says_so(
    slack: Running, fake_slack: FakeSlack, other_site: OtherSite
) -> None:
    linked = await slack.shared_file(fake_slack.files.external("Plan.gdoc", other_site.url("/document/d/1")))
    assert linked.url is None and linked.ref
    failed = await slack.failure(linked)
    assert failed.reason == "unsupported" and "outside Slack" in str(failed)
    assert other_site.requests == []


async def test_a_file_shared_from_another_organisation_is_looked_up_then_downloaded(
    slack: Running, fake_slack: FakeSlack
) -> None:
    # In a Slack Connect channel the event names only the file's id; files.info tells the rest.
    item = fake_slack.files.hosted(PDF, "their-report.pdf", "application/pdf")
    stub = await slack.shared_file(fake_slack.files.connect_stub(item))
    assert (stub.ref, stub.url) == (item["id"], None)
    assert await slack.adapter.fetch_media(stub, max_bytes=LIMIT, timeout=30) == PDF
    assert [call.args["file"] for call in fake_slack.calls_to("files.info")] == [item["id"]]


async def test_a_file_looked_up_is_refused_by_its_size_before_the_download(
    slack: Running, fake_slack: FakeSlack
) -> None:
    item = fake_slack.files.hosted(PDF, "their-big.pdf", "application/pdf", size=30_000_000)
    stub = await slack.shared_file(fake_slack.files.connect_stub(item))
    assert (await slack.failure(stub)).reason == "too_large"
    assert fake_slack.files.served.downloads == []
