"""Events a stranger (or a change on Discord's side) can send that must not stop the bot for everyone.

discord.py parses each gateway event inside its receive loop; an error there
ends the client's connection, so one malformed MESSAGE_CREATE would cost a
reconnect (and every message sent meanwhile). Such an event is skipped and
logged (``discord.event.rejected``); a message discord.py reads but the
adapter cannot convert is skipped as ``discord.message.rejected``; half of a
UTF-16 pair in a file name, an embed or a name is stored as U+FFFD. The
messages after them are answered on the same connection.
"""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.fakes.discord_api import DiscordEmulator, payloads
from tests.fakes.model_server import ModelServer

STRANGER = "300000000000000666"
HALF = "\ud800"
"""Half of a UTF-16 surrogate pair: valid in a JSON string escape, impossible to encode as UTF-8."""


def direct_message(emulator: DiscordEmulator, user: str, **changes: Any) -> dict[str, Any]:
    """A DM from ``user`` as Discord sends it, with ``changes`` applied (a value of None removes the field)."""
    data = payloads.message(message_id=payloads.snowflake(), channel_id=emulator.world.dm_channel_for(user),
                            author=emulator.world.user(user), content="secret words")  # fmt: skip
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


async def test_events_discord_py_cannot_parse_are_skipped_without_dropping_the_connection(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    run = await start_gateway()
    assert emulator.gateway is not None
    unparseable = [
        direct_message(emulator, STRANGER, author="not an object"),
        direct_message(emulator, STRANGER, attachments="not a list"),
        direct_message(emulator, STRANGER, id="not-a-snowflake"),
    ]
    with capture_logs() as logs:
        for data in unparseable:
            await emulator.gateway.dispatch("MESSAGE_CREATE", data)
        after = await emulator.dm(ALICE, "still there?")
        (sent,) = await emulator.wait_sent(1)
    assert str(sent.reference["message_id"]) == after["id"] and sent.content == "ok: still there?"
    assert run.discord.restarts == 0 and len(emulator.gateway.identifies) == 1  # the same connection throughout
    rejected = [entry for entry in logs if entry["event"] == "discord.event.rejected"]
    assert [(entry["type"], entry["message_id"]) for entry in rejected] == [
        ("MESSAGE_CREATE", data["id"]) for data in unparseable
    ]
    assert all(entry["reason"] for entry in rejected) and "secret words" not in str(rejected)


async def test_a_message_the_adapter_cannot_convert_is_skipped_with_a_reason(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    await start_gateway()
    assert emulator.gateway is not None
    odd = payloads.attachment("notes.pdf", content_type="application/pdf")
    odd["content_type"] = 42  # discord.py keeps it as it came
    odd_type = direct_message(emulator, STRANGER, attachments=[odd])
    no_author = direct_message(emulator, STRANGER, author=None)  # discord.py reads it, but whose is it?
    with capture_logs() as logs:
        for data in (odd_type, no_author):
            await emulator.gateway.dispatch("MESSAGE_CREATE", data)
        after = await emulator.dm(ALICE, "next one")
        (sent,) = await emulator.wait_sent(1)
    assert str(sent.reference["message_id"]) == after["id"]
    rejected = [entry for entry in logs if entry["event"] == "discord.message.rejected"]
    assert [(entry["message_id"], entry["user"]) for entry in rejected] == [
        (odd_type["id"], STRANGER), (no_author["id"], ""),
    ]  # fmt: skip
    assert all(entry["reason"] for entry in rejected) and "secret words" not in str(rejected)


async def test_half_a_surrogate_pair_in_a_file_name_embed_or_name_is_stored_and_answered(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    await start_gateway()
    assert emulator.gateway is not None
    emulator.world.user(ALICE)["global_name"] = f"Alice {HALF}"
    attachment = payloads.attachment(f"cat{HALF}.png", content_type="image/png")
    embed = {"type": "rich", "title": f"an embed {HALF}", "description": HALF,
             "fields": [{"name": HALF, "value": HALF}]}  # fmt: skip
    data = direct_message(emulator, ALICE, content="look at this", attachments=[attachment], embeds=[embed])
    await emulator.gateway.dispatch("MESSAGE_CREATE", data)
    notice, sent = await emulator.wait_sent(2)  # the file is not on the emulator's CDN: the user is told first
    assert notice.content.startswith("I couldn't use cat\ufffd.png: ")
    assert str(sent.reference["message_id"]) == data["id"]
    assert "cat\ufffd.png" in model_server.last_request.last_user_text
