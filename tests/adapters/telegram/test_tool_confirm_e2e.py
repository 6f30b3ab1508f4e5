"""Asking before a tool runs, end to end: the real gateway, real aiogram against the emulator, the fake model.

The model calls a tool marked ``confirm``; the gateway asks in the chat with Allow and Deny buttons
and the turn waits. Only after the asking person presses Allow does the tool run; Deny, no answer
in time, or ``/stop`` leave it unrun, and the model reads why. Someone else's press changes nothing.

The tool is :class:`Guarded`, a stand-in for an MCP server's tool marked ``confirm`` (``McpTool``,
built in another part of the issue): like it, it calls the gateway's ``approvals.confirm`` first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from structlog.testing import capture_logs

from agent.tools import Tool, ToolContext
from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram, TelegramRun
from tests.fakes.model_server import ModelServer, RequestRecord, Text, ToolCalls, ToolUse
from tests.fakes.telegram_api import BotMessage, Chat, Failure, TelegramAPI
from tests.gateway.test_memory_scopes_e2e import tool_results
from tests.waiting import eventually

BOT = "@switchboard_test_bot"
GROUP = Chat.supergroup(-100321, "Ops")
SECRET_TOKEN = "sk-proj-abcdefghijklmnopqrstuvwx"
SHELL = {"name": "shell", "command": "shell-server", "confirm": True}
"""The server :class:`Guarded` stands for, as config.yaml names it (the tool is registered by hand, not started)."""

Confirm = Callable[[ToolContext, Tool, dict[str, Any]], Awaitable[str | None]]


class Guarded(Tool):
    """A tool of a server named "shell" that asks first, as McpTool does for a tool the config marks confirm."""

    name = "shell__run"
    description = "Run a shell command on the operator's machine."
    parameters = {"type": "object", "properties": {"command": {"type": "string"}, "api_token": {"type": "string"}},
                  "required": ["command"]}  # fmt: skip
    source = "shell"
    title = "run"

    def __init__(self, confirm: Confirm) -> None:
        self._confirm = confirm
        self.ran: list[str] = []

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        refusal = await self._confirm(context, self, arguments)
        if refusal is not None:
            return refusal
        self.ran.append(arguments["command"])
        return f"ran {arguments['command']}: up 3 days"


async def start_with_tool(start_telegram: StartTelegram, **sections: Any) -> tuple[TelegramRun, Guarded]:
    sections["tools"] = {"mcp_servers": [SHELL], **sections.get("tools", {})}
    run = await start_telegram(telegram={"allowed_chats": [str(GROUP.id)]}, **sections)
    tool = Guarded(run.gateway.approvals.confirm)
    run.gateway.agent.tools.register(tool)  # before the first session starts: its tool list is fixed then
    return run, tool


def call_the_tool(model_server: ModelServer) -> None:
    model_server.script(ToolCalls(ToolUse("shell__run", {"command": "uptime", "api_token": SECRET_TOKEN})),
                        Text("Here is what I found."))  # fmt: skip


async def asked(api: TelegramAPI, chat: Chat) -> BotMessage:
    """The question with buttons the bot sent to ``chat``."""
    [question] = await api.wait_sent(1, where=lambda m: m.chat_id == chat.id and m.keyboard is not None)
    return question


async def alice_asked(start_telegram: StartTelegram, api: TelegramAPI, model_server: ModelServer,
                      **sections: Any) -> tuple[Guarded, BotMessage]:  # fmt: skip
    """A gateway with the tool; Alice asks in her DM, the model calls the tool: the tool and the question."""
    _, tool = await start_with_tool(start_telegram, **sections)
    call_the_tool(model_server)
    await api.say(ALICE, "restart it please")
    return tool, await asked(api, Chat.private(ALICE))


async def result_read(model_server: ModelServer) -> str:
    """The tool result the model read (the turn's second request)."""
    await eventually(lambda: len(model_server.requests) >= 2, "the model asked again with the tool's result")
    second: RequestRecord = model_server.requests[1]
    [result] = tool_results(second)
    return result


async def test_the_tool_runs_only_after_the_asking_person_allows_it_and_another_press_does_not_count(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    run, tool = await start_with_tool(start_telegram)
    call_the_tool(model_server)
    asking = await telegram_api.say(ALICE, f"{BOT} how long has the server been up?", chat=GROUP)
    question = await asked(telegram_api, GROUP)

    assert question.reply_to == asking["message"]["message_id"]
    assert "shell.run" in question.visible and "command: uptime" in question.visible
    assert "Alice" in question.visible
    assert SECRET_TOKEN not in question.visible and "api_token: [REDACTED]" in question.visible
    assert tool.ran == [] and len(model_server.requests) == 1  # the turn waits

    with capture_logs() as logs:
        await telegram_api.press(BOB, question, "Allow")  # not Bob's question: it does not count
        await eventually(lambda: any(e["event"] == "tool.confirm.press_ignored" for e in logs), "Bob's press ignored")
    [ignored] = [e for e in logs if e["event"] == "tool.confirm.press_ignored"]
    assert ignored["user"] == str(BOB.id) and ignored["tool"] == "shell.run"
    assert tool.ran == [] and question.keyboard is not None and len(model_server.requests) == 1

    await telegram_api.press(ALICE, question, "Allow")
    [reply] = await telegram_api.wait_sent(1, where=lambda m: m.chat_id == GROUP.id and "found" in m.visible)
    assert tool.ran == ["uptime"]
    assert await result_read(model_server) == "ran uptime: up 3 days"
    assert question.keyboard is None and question.visible.startswith("shell.run: allowed by Alice")
    assert len(telegram_api.callback_answers) == 2  # both presses acknowledged to Telegram at once
    assert reply.visible == "Here is what I found."


async def test_deny_leaves_the_tool_unrun_and_the_model_reads_who_refused(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    with capture_logs() as logs:
        tool, question = await alice_asked(start_telegram, telegram_api, model_server)
        await telegram_api.press(ALICE, question, "Deny")
        assert await result_read(model_server) == "not run: Alice refused"
    assert tool.ran == []
    assert question.keyboard is None and question.visible.startswith("shell.run: refused by Alice, not run.")
    events = [(e["event"], e.get("allowed")) for e in logs if e["event"].startswith("tool.confirm.")]
    assert events == [("tool.confirm.asked", None), ("tool.confirm.answered", False)]
    assert not any(SECRET_TOKEN in str(entry) or "uptime" in str(entry) for entry in logs)  # arguments never logged


async def test_no_answer_in_time_is_a_clear_result_and_closes_the_question(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    tool, question = await alice_asked(start_telegram, telegram_api, model_server, tools={"confirm_timeout": 5})
    assert await result_read(model_server) == "not run: nobody answered within 5 s"
    assert tool.ran == []
    assert question.keyboard is None and question.visible.startswith("shell.run: no answer within 5 s, not run.")


async def test_stop_while_waiting_stops_the_turn_and_closes_the_question(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    tool, question = await alice_asked(start_telegram, telegram_api, model_server)
    await telegram_api.say(ALICE, "/stop")
    await eventually(lambda: question.keyboard is None, "the question closed")
    assert question.visible.startswith("shell.run: the reply was stopped, not run.")
    assert tool.ran == [] and len(model_server.requests) == 1


async def test_the_wait_does_not_count_against_the_agents_tool_timeout(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    """A question that expires ends as "nobody answered", not as a tool that ran out of time (agent.tool_timeout)."""
    tool, question = await alice_asked(start_telegram, telegram_api, model_server, agent={"tool_timeout": 5},
                                       tools={"confirm_timeout": 6})  # fmt: skip
    assert await result_read(model_server) == "not run: nobody answered within 6 s"
    assert tool.ran == [] and question.visible.startswith("shell.run: no answer within 6 s, not run.")


async def test_a_question_telegram_holds_back_with_a_429_goes_out_after_the_wait(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    telegram_api.fail("sendMessage", Failure.too_many_requests(1))  # in a DM the question is the first message
    tool, question = await alice_asked(start_telegram, telegram_api, model_server)
    await telegram_api.press(ALICE, question, "Allow")
    assert await result_read(model_server) == "ran uptime: up 3 days"
    assert tool.ran == ["uptime"] and telegram_api.rate_limited == 1
