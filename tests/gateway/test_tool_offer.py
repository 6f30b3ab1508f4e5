"""``Conversations(tool_offer=...)``: a new session is offered the tools its key may use, and its prompt speaks
of those and no others; on the real store and agent, the model requests on the fake model server."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from adapters.contract import ChatType
from agent import ChatMessage
from agent.prompt import MEMORY_GUIDANCE, SESSION_SEARCH_GUIDANCE
from config import load_config
from config.models import SessionsConfig
from gateway.agent_factory import build_agent
from gateway.inbound.session_key import SessionKey
from gateway.runner import search_function
from gateway.turn.conversations import Conversations
from storage import Store
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import write_config
from tests.gateway.test_session_tools_e2e import ServerTool, names

OWNER = SessionKey(platform="loopback", chat_type=ChatType.DM, chat_id="c1", user_id="owner")
GUEST = SessionKey(platform="loopback", chat_type=ChatType.DM, chat_id="c2", user_id="guest")


async def test_a_new_session_is_offered_the_tools_its_key_may_use_and_its_prompt_agrees(
    model_server: ModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    loaded = load_config(write_config(home, model_server), {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    store = await Store.open(loaded.db_path)
    agent = build_agent(loaded, search=search_function(store))
    agent.tools.replace("shell", [ServerTool("shell", "run", "Run a command.")])
    asked: list[SessionKey] = []

    def offer(key: SessionKey) -> Collection[str] | None:
        asked.append(key)
        return None if key == OWNER else {"session_search", "no_such_tool"}  # the owner: every tool

    conversations = Conversations(store, agent, SessionsConfig(), tool_offer=offer)
    try:
        offered = {}
        for key in (OWNER, GUEST):
            conversation = await conversations.open(key)
            session = conversations.agent_session(conversation.record)
            model_server.script(Text("hello"))
            await session.run_turn([*conversation.history, ChatMessage.user("hi")], user_time=1000.0)
            offered[key] = (names(model_server.last_request), model_server.last_request.body["system"])
            assert (await conversations.open(key)).record.id == conversation.record.id  # offered once, at the start
    finally:
        await agent.aclose()
        await store.close()
    assert asked == [OWNER, GUEST]
    owner_tools, owner_prompt = offered[OWNER]
    guest_tools, guest_prompt = offered[GUEST]
    assert owner_tools == ["memory", "session_search", "shell__run"]
    assert guest_tools == ["session_search"]
    text = lambda system: "".join(block["text"] for block in system)  # noqa: E731
    assert MEMORY_GUIDANCE[:40] in text(owner_prompt) and MEMORY_GUIDANCE[:40] not in text(guest_prompt)
    assert SESSION_SEARCH_GUIDANCE[:40] in text(guest_prompt)
