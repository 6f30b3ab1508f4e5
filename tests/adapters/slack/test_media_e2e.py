"""Files users share on Slack, end to end: real slack-bolt (HTTP mode) against the fake Slack, which serves
``url_private_download`` to the bot token only; the real gateway's media step; the real anthropic SDK
against the fake model server."""

from __future__ import annotations

import io

from PIL import Image

from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET, SlackFactory
from tests.fakes import media_files
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import FakeSlack, message, post_signed


async def test_an_image_shared_in_a_dm_reaches_the_model_with_its_message(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    model_server.responder = lambda record: Text("A red and blue square.")
    picture = media_files.png(2400, 2400)
    item = fake_slack.files.hosted(picture, "diagram.png", "image/png", width=2400, height=2400)
    event = message(DM, ALICE, "what does this diagram show?", subtype="file_share", files=[item])
    assert (await post_signed(slack.url, event, SIGNING_SECRET)).status == 200

    await fake_slack.wait_for(lambda: any("A red and blue square." in p.text for p in fake_slack.posts))
    [request] = model_server.requests
    [image] = request.media
    assert (image.wire, image.media_type) == ("image", "image/png")
    width, height = Image.open(io.BytesIO(image.data)).size
    assert width == height and width * height <= 1_150_000  # downscaled from 2400 x 2400, still square
    assert "what does this diagram show?" in str(request.messages[-1]["content"])
    [download] = fake_slack.files.served.downloads_of(item["id"])
    assert download.headers.get("Authorization", "").startswith("Bearer ")
