"""Files users send on Discord, end to end: real discord.py against the emulator (its CDN serving the
attachments), the real gateway's media step and pipeline, the real anthropic SDK against the fake model server."""

from __future__ import annotations

from io import BytesIO

from pypdf import PdfReader

from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.fakes import media_files
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer, Text


async def test_a_pdf_reaches_the_model_as_a_document_with_the_question(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("It has three pages.")
    await start_gateway()
    report = media_files.pdf(3, "Quarterly figures, page")
    attachment = emulator.attachment(report, "report.pdf", content_type="application/pdf")
    await emulator.dm(ALICE, "how long is this report?", attachments=[attachment])

    (sent,) = await emulator.wait_sent(1)
    assert sent.content == "It has three pages."
    [request] = model_server.requests
    [document] = request.media
    assert (document.wire, document.media_type) == ("document", "application/pdf")
    assert document.data == report and len(PdfReader(BytesIO(document.data)).pages) == 3
    content = request.messages[-1]["content"]
    assert content[0]["type"] == "document" and content[0].get("title") == "report.pdf"
    assert any(b["type"] == "text" and "how long is this report?" in b["text"] for b in content)


async def test_a_picture_of_an_unreadable_kind_and_a_good_one_in_one_message(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("Nice cat.")
    await start_gateway()
    cat = emulator.attachment(media_files.png(640, 480), "cat.png", content_type="image/png", width=640, height=480)
    clip = emulator.attachment(b"\x00\x00\x00\x18ftypisom" + bytes(64), "clip.mp4", content_type="video/mp4")
    await emulator.dm(ALICE, "look", attachments=[cat, clip])

    notice, answer = await emulator.wait_sent(2)
    assert notice.content.startswith("I couldn't use clip.mp4: ") and answer.content == "Nice cat."
    [request] = model_server.requests
    [image] = request.media
    assert (image.wire, image.media_type) == ("image", "image/png")
