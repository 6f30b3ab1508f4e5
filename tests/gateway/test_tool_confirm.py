"""Asking before a tool runs, where there are no buttons, and what the question shows of the arguments.

The whole path with buttons (Telegram) is in ``tests/adapters/telegram/test_tool_confirm_e2e.py``.
"""

from __future__ import annotations

from structlog.testing import capture_logs

from adapters.contract import ButtonPress
from gateway.tools.approval import MAX_ARGUMENTS, VALUE_CHARS, summary
from tests.adapters.telegram.test_tool_confirm_e2e import SECRET_TOKEN, SHELL, Guarded, call_the_tool, result_read
from tests.fakes.model_server import ModelServer
from tests.gateway.conftest import GatewayFactory, handled


async def test_a_platform_without_buttons_gets_a_refusal_that_says_why(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"tools": {"mcp_servers": [SHELL]}})
    assert not running.adapter.supports_buttons
    tool = Guarded(running.gateway.approvals.confirm)
    running.gateway.agent.tools.register(tool)
    call_the_tool(model_server)
    await running.adapter.inject("restart it please", chat_id="c1")
    result = await result_read(model_server)
    assert result.startswith("not run: shell.run needs the person's approval with buttons")
    assert "cannot show them" in result and "loopback" in result
    assert tool.ran == []
    await handled(running.store)
    texts = running.adapter.texts()
    assert texts[-1] == "Here is what I found." and not any("May I run" in text for text in texts)  # nothing asked


async def test_a_press_of_no_open_question_is_ignored_and_logged(start_gateway: GatewayFactory) -> None:
    running = await start_gateway()
    approvals = running.gateway.approvals
    assert running.adapter.on_button == approvals.on_button  # every adapter's presses go to the approvals
    with capture_logs() as logs:
        for button in ("confirm:AAAAAAAAAAAAAAAA:allow", "something:else", "confirm:short:deny"):
            await approvals.on_button(ButtonPress(platform="loopback", chat_id="c1", user_id="u1", button_id=button))
    assert [e["event"] for e in logs] == ["tool.confirm.press_ignored"] * 3
    assert approvals.waiting == 0


def test_the_summary_masks_secrets_and_cuts_long_values() -> None:
    shown = summary({"query": "crash\non   start", "password": "hunter2", "note": f"use {SECRET_TOKEN}",
                     "body": "x" * 500, "filters": {"state": "open"}})  # fmt: skip
    lines = shown.splitlines()
    assert lines[0] == "query: crash on start"
    assert lines[1] == "password: [REDACTED]"
    assert SECRET_TOKEN not in shown and lines[2].startswith("note: use sk-")
    assert len(lines[3]) == len("body: ") + VALUE_CHARS and lines[3].endswith("…")
    assert lines[4] == 'filters: {"state": "open"}'
    many = summary({f"a{i}": i for i in range(MAX_ARGUMENTS + 3)})
    assert many.splitlines()[-1] == "(and 3 more)"
    assert summary({}) == "(no arguments)"
