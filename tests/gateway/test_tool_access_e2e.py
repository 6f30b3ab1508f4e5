"""A tool a person may not use is not offered to the model in their session, through the whole gateway:
the fake model server records the tools each request offered.

The servers' tools are registered as the MCP client registers them (``tests/fakes/server_tool.py``):
these tests are about who is offered them, not about how they got there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adapters.contract import AccessPolicy, ChatType
from config import load_config
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from gateway.store_setup import open_configured_store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer, RequestRecord, Text, ToolUse
from tests.fakes.server_tool import ServerTool
from tests.gateway.conftest import write_config

TOOLS = {
    "tools": {"mcp_servers": [
        {"name": "files", "command": "files-server"},  # no rule: everyone who may talk to the bot
        {"name": "shell", "command": "shell-server", "allow": [{"users": ["alice"]}]},  # the operator only
    ]},
    "gateway": {"tool_progress": False},
}  # fmt: skip


@pytest.fixture
def shell() -> ServerTool:
    return ServerTool("shell", "run")


@pytest_asyncio.fixture
async def adapter(tmp_path: Path, model_server: ModelServer, shell: ServerTool) -> AsyncIterator[LoopbackAdapter]:
    home = tmp_path / "home"
    loaded = load_config(write_config(home, model_server, TOOLS), {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    store = await open_configured_store(loaded)
    agent = build_agent(loaded, search=search_function(store))
    agent.tools.replace("files", [ServerTool("files", "read_file")])
    agent.tools.replace("shell", [shell])
    adapter = LoopbackAdapter()
    gateway = Gateway(loaded, store, [adapter], agent, extra_access={"loopback": AccessPolicy(allow_all=True)})
    await gateway.start()
    try:
        yield adapter
    finally:
        await gateway.shutdown()


def offered(request: RequestRecord) -> list[str]:
    return sorted(tool["name"] for tool in request.tools)


async def asked(adapter: LoopbackAdapter, model_server: ModelServer, **who: Any) -> RequestRecord:
    """A message from ``who``; the model request that answered it."""
    model_server.script(Text("ok"))
    before = len(model_server.requests)
    await adapter.inject("what can you do?", **who)
    await adapter.wait_sent(len(adapter.sent) + 1)
    assert len(model_server.requests) == before + 1
    return model_server.requests[-1]


@pytest.mark.xfail(strict=True, reason="needs i32-agent: the session's frozen tool list, made from tool_offer")
async def test_a_tool_is_offered_to_the_user_it_is_allowed_to_and_hidden_from_the_others(
    adapter: LoopbackAdapter, model_server: ModelServer
) -> None:
    alice = await asked(adapter, model_server, chat_id="dm-alice", user_id="alice")
    bob = await asked(adapter, model_server, chat_id="dm-bob", user_id="bob")
    thread = await asked(adapter, model_server, chat_id="team", user_id="alice", chat_type=ChatType.GROUP,
                         thread_id="t1", mentioned=True)  # fmt: skip
    assert offered(alice) == ["files__read_file", "memory", "session_search", "shell__run"]
    assert offered(bob) == ["files__read_file", "memory", "session_search"]
    assert offered(thread) == ["files__read_file", "memory", "session_search"]  # others read what it returns


@pytest.mark.xfail(strict=True, reason="needs i32-agent: a call is checked against the session's frozen tool list")
async def test_a_tool_not_offered_does_not_run_when_the_model_calls_it_by_name_anyway(
    adapter: LoopbackAdapter, model_server: ModelServer, shell: ServerTool
) -> None:
    model_server.script(ToolUse("shell__run", {}), Text("done"))  # a guessed name, or a prompt injection's
    await adapter.inject("clean up the disk", chat_id="dm-bob", user_id="bob")
    await adapter.wait_sent(1)
    assert shell.runs == []
    assert "ran" not in str(model_server.requests[-1].messages[-1])  # the model read that it may not
