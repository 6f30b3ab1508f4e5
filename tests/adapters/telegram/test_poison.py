"""Updates a stranger (or a change on Telegram's side) can send that must not stop the bot for everyone.

Two kinds: an update aiogram cannot read (a field of an unexpected type), and
one that reads fine but carries half of a UTF-16 pair (a lone surrogate, sent
as a ``\\ud800`` JSON escape) in a field other than the text, such as a
document's or an audio's file name. The first is rejected and logged
(``telegram.update.rejected``, with the update id and the reason, never the
content) and Telegram is told it is done with; the second is stored with the
half pair replaced by U+FFFD. Either way the updates after it are answered.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.contract import InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.adapters.telegram.conftest import ALICE, StartTelegram, TelegramRun, telegram_section
from tests.adapters.telegram.test_crash import launch
from tests.adapters.telegram.test_webhook import SECRET, free_port, webhook_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI, User
from tests.gateway.conftest import write_config
from tests.gateway.processes import terminate
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway process, several times: slow on a busy machine

STRANGER = User(id=6666, first_name="Mallory")
HALF = "\ud800"
"""Half of a UTF-16 surrogate pair: valid in a JSON string escape, impossible to encode as UTF-8."""
HANG_GUARD = 120.0


async def send_poison(api: TelegramAPI) -> dict[str, dict[str, Any]]:
    """Queue the stranger's poison updates, one of each kind; returns them by name."""
    audio = {"file_id": "a-1", "file_unique_id": "ua-1", "duration": 3, "file_name": f"song{HALF}.mp3",
             "title": f"Song {HALF}", "mime_type": "audio/mpeg"}  # fmt: skip
    return {
        # A field of a type aiogram does not expect (as after a change to the Bot API).
        "drifted": await api.say(STRANGER, "secret words in a drifted update", extra={"date": {"when": "now"}}),
        # An update kind nobody asked for (allowed_updates says message only).
        "new kind": await api.push_update(brand_new_update={"anything": [1, 2, 3]}),
        # Half a surrogate pair in file names, not in the text.
        "document": await api.send_document(STRANGER, f"report{HALF}.pdf", "application/pdf"),
        "audio": await api.say(STRANGER, extra={"audio": audio}),
    }


def rejected_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "telegram.update.rejected"]


def stored_payloads(run: TelegramRun) -> dict[str, InboundMessage]:
    with closing(sqlite3.connect(run.loaded.db_path)) as db:
        rows = db.execute("SELECT event_id, payload FROM inbox WHERE platform = 'telegram'").fetchall()
    return {event_id: InboundMessage.from_dict(json.loads(payload)) for event_id, payload in rows}


async def test_polling_skips_an_unreadable_update_stores_a_repaired_one_and_answers_the_rest(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    poison = await send_poison(telegram_api)  # all before the start: one getUpdates batch with Alice's message
    after = await telegram_api.say(ALICE, "are you still there?")
    with capture_logs() as logs:
        run = await start_telegram()
        [reply] = await telegram_api.wait_sent(1, where=lambda m: m.chat_id == ALICE.id)
        await eventually(lambda: telegram_api.confirmed_below > after["update_id"], "every update confirmed")
    assert reply.visible == "re: are you still there?"

    [line] = rejected_lines(logs)
    assert line["update_id"] == poison["drifted"]["update_id"]
    assert "message.date" in line["reason"] and "secret words" not in str(line)
    stored = stored_payloads(run)
    assert stored[str(poison["document"]["update_id"])].attachments[0].name == "report\ufffd.pdf"
    assert stored[str(poison["audio"]["update_id"])].attachments[0].name == "song\ufffd.mp3"
    assert str(poison["new kind"]["update_id"]) not in stored and str(poison["drifted"]["update_id"]) not in stored


async def test_webhook_answers_200_to_an_unreadable_update_and_the_next_one_gets_through(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    with capture_logs() as logs:
        run = await start_telegram(telegram=webhook_config(free_port()))
        poison = await send_poison(telegram_api)
        after = await telegram_api.say(ALICE, "through the webhook")
        [reply] = await telegram_api.wait_sent(1, where=lambda m: m.chat_id == ALICE.id)
    assert reply.visible == "re: through the webhook"
    # Telegram delivers in order and keeps an update until it gets 200: each poison update got 200 at once.
    ids = [update["update_id"] for update in (*poison.values(), after)]
    assert [(i, status) for i, status in telegram_api.webhook_deliveries if i in ids] == [(i, 200) for i in ids]
    [line] = rejected_lines(logs)
    assert line["update_id"] == poison["drifted"]["update_id"] and "message.date" in line["reason"]
    assert "secret words" not in str(line)
    assert stored_payloads(run)[str(poison["document"]["update_id"])].attachments[0].name == "report\ufffd.pdf"


class FailingOnce:
    """An intake whose storage fails the first time (a database that is down), then works."""

    def __init__(self) -> None:
        self.calls: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.calls.append(message)
        if len(self.calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")


async def test_webhook_still_answers_503_when_storing_fails(telegram_api: TelegramAPI) -> None:
    port = free_port()
    hook = webhook_config(port)
    settings = TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url, mode="webhook",
                                webhook_url=str(hook["webhook_url"]), webhook_secret=SECRET, webhook_port=port)  # fmt: skip
    adapter, intake = TelegramAdapter(settings), FailingOnce()
    await adapter.start(intake)
    try:
        update = await telegram_api.say(ALICE, "keep this one")
        await eventually(lambda: len(intake.calls) == 2, "Telegram to deliver the update again")
    finally:
        await adapter.close()
    assert [s for i, s in telegram_api.webhook_deliveries if i == update["update_id"]] == [503, 200]


async def test_a_strangers_poison_does_not_stop_switchboard_run_answering_others(
    tmp_path: Path, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    """The real ``switchboard run`` process with the real adapter; the emulator stays in this process."""
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    home = tmp_path / "home"
    config = write_config(home, model_server, telegram_section(telegram_api, allowed_users=[str(ALICE.id)]))
    log_path = home / "logs" / "gateway.log"
    process = launch(home, config)
    try:
        await eventually(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"), "the start",
                         process=process, timeout=HANG_GUARD)  # fmt: skip
        poison = await send_poison(telegram_api)
        await telegram_api.say(ALICE, "hello after the poison")
        await eventually(lambda: any(m.chat_id == ALICE.id for m in telegram_api.sent), "Alice's answer",
                         process=process, timeout=HANG_GUARD)  # fmt: skip
        await eventually(lambda: not telegram_api.updates, "every update confirmed", process=process, timeout=HANG_GUARD)
    finally:
        code = await terminate(process, limit=HANG_GUARD)
    assert code == 0, (home / "stderr.txt").read_text("utf-8")[-3000:]
    assert [m.visible for m in telegram_api.sent if m.chat_id == ALICE.id] == ["re: hello after the poison"]
    log_text = log_path.read_text("utf-8")
    [line] = [line for line in log_text.splitlines() if "telegram.update.rejected" in line]
    assert f"update_id={poison['drifted']['update_id']}" in line and "message.date" in line
    assert "secret words" not in log_text  # the old code logged the whole batch with every failed poll
