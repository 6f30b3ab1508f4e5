"""The turn's media step through the real Gateway, with the loopback adapter in place of a platform.

What does not depend on a platform's way of sending files: an album's messages waited for so they are
one turn, and files refused as a whole (``media.enabled: false``) told to the user while the words are
answered. Each platform's files end to end: ``tests/adapters/<platform>/test_media_e2e.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.contract import Attachment
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import GatewayFactory, settled, spoken

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


async def test_the_messages_of_an_album_wait_for_each_other_and_are_one_turn(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("seen: " + " / ".join(spoken(record.last_user_text).split("\n\n")))
    running = await start_gateway({"media": {"album_wait_ms": 2000}})
    await running.adapter.inject("first of the album", group_id="album-1")
    await asyncio.sleep(0.3)  # pacing, part of the scenario: the album's next message comes a moment later
    await running.adapter.inject("second of the album", group_id="album-1")
    await settled(running.store)

    assert running.adapter.texts() == ["seen: first of the album / second of the album"]
    assert len(model_server.requests) == 1


async def test_with_media_off_each_file_is_told_in_one_message_and_the_words_are_answered(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("answered")
    running = await start_gateway({"media": {"enabled": False}})
    files = (Attachment(kind="photo", ref="p1", size=1000), Attachment(kind="document", name="notes.txt", ref="d1"))
    await running.adapter.inject("here are my notes", attachments=files)
    await settled(running.store)

    notice, answer = running.adapter.texts()
    assert [line for line in notice.splitlines() if line] == [
        "I couldn't use some of what you sent:",
        "• the photo: files are not read here.",  # a Markdown list, as the platform shows one
        "• notes.txt: files are not read here.",
    ]
    assert answer == "answered"
    [request] = model_server.requests
    assert "here are my notes" in request.last_user_text and "[notes.txt could not be used: " in request.last_user_text
