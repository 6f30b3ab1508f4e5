"""A real MCP server's tool marked ``confirm``, end to end on Telegram: the real gateway starts the fake MCP
server (stdio), real aiogram talks to the emulator, the fake model calls the tool. The tool runs in the
server only after the asking person presses Allow; after Deny it never runs and the model reads why.

The tool is the fake server's ``note``, which writes a line to a file the test reads: so the test sees
whether, and when, the call reached the server (:mod:`tests.adapters.telegram.test_tool_confirm_e2e`
covers the approvals' other cases with a stand-in tool).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.adapters.telegram.conftest import ALICE, StartTelegram
from tests.adapters.telegram.test_tool_confirm_e2e import asked, result_read
from tests.fakes.mcp_server import stdio_command
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.telegram_api import BotMessage, Chat, TelegramAPI
from tests.waiting import eventually


def notes_server(notes: Path) -> dict[str, Any]:
    """``tools:`` with the fake MCP server, its ``note`` tool asking first."""
    command = stdio_command()
    command["env"] = {**command["env"], "FAKE_MCP_NOTES": str(notes)}  # type: ignore[dict-item]
    return {"mcp_servers": [{"name": "notes", **command, "include": ["note", "lookup"], "confirm": ["note"]}]}


async def asked_to_note(start_telegram: StartTelegram, api: TelegramAPI, model_server: ModelServer, notes: Path,
                        text: str, answer: str) -> BotMessage:  # fmt: skip
    """A gateway with the notes server; Alice asks, the model calls ``notes__note`` with ``text``: the question."""
    await start_telegram(tools=notes_server(notes))
    model_server.script(ToolCalls(ToolUse("notes__note", {"text": text})), Text(answer))
    await api.say(ALICE, f"note: {text}")
    return await asked(api, Chat.private(ALICE))


def written(notes: Path) -> list[str]:
    return notes.read_text(encoding="utf-8").splitlines() if notes.exists() else []


async def test_a_confirm_tool_of_an_mcp_server_runs_only_after_the_asking_person_allows_it(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    question = await asked_to_note(start_telegram, telegram_api, model_server, notes, "buy milk", "Noted it.")
    assert "notes.note" in question.visible and "text: buy milk" in question.visible
    assert written(notes) == [] and len(model_server.requests) == 1  # asked, not run: the turn waits
    assert "notes__note" in [tool["name"] for tool in model_server.requests[0].tools]

    await telegram_api.press(ALICE, question, "Allow")
    await telegram_api.wait_sent(1, where=lambda m: m.chat_id == ALICE.id and m.visible == "Noted it.")
    assert written(notes) == ["buy milk"]  # the server ran it, once, after the press
    assert await result_read(model_server) == "noted: buy milk"
    assert question.keyboard is None and "allowed by" in question.visible


async def test_a_refused_mcp_tool_never_reaches_its_server_and_the_model_reads_the_refusal(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    question = await asked_to_note(start_telegram, telegram_api, model_server, notes, "delete everything", "I won't.")
    await telegram_api.press(ALICE, question, "Deny")
    await eventually(lambda: len(model_server.requests) >= 2, "the model asked again with the refusal")
    result = await result_read(model_server)
    assert result.startswith("not run:") and "refused" in result
    assert written(notes) == []  # the call never reached the server
