"""Who is offered which tools (``gateway/tools/access.py``): the ``tools:`` section loaded from a real
config file, a real tool registry holding the built-in tools and the tools of two made-up servers, and
session keys made from messages the way the gateway makes them."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from adapters.contract import ChatType, InboundMessage
from agent.tools import default_registry
from agent.tools.registry import ToolRegistry
from config import load_config
from config.models import Settings
from gateway.inbound.session_key import SessionKey, session_key_for
from gateway.operations.tool_rules import tool_rule_warnings
from gateway.tools.access import ToolAccess
from tests.fakes.server_tool import ServerTool
from tests.gateway.processes import switchboard

BUILT_IN = ("memory", "session_search")


def registry_with(**servers: tuple[str, ...]) -> ToolRegistry:
    registry = default_registry()
    for server, titles in servers.items():
        registry.replace(server, [ServerTool(server, title) for title in titles])
    return registry


TELEGRAM = '  telegram: {allowed_users: ["111", "222"]}'


def settings(tmp_path: Path, tools_yaml: str, platforms_yaml: str = TELEGRAM) -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(f"platforms:\n{platforms_yaml}\ntools:\n{tools_yaml}", encoding="utf-8")
    return load_config(path, {"SWITCHBOARD_HOME": str(tmp_path)}).settings


def key(user: str, *, chat: str | None = None, chat_type: ChatType = ChatType.DM, platform: str = "telegram",
        thread: str | None = None, per_user: bool = True) -> SessionKey:  # fmt: skip
    """The key of a message from ``user`` (a DM of their own unless ``chat`` is given)."""
    message = InboundMessage(platform=platform, event_id="e1", chat_id=chat or f"dm-{user}", chat_type=chat_type,
                             user_id=user, thread_id=thread)  # fmt: skip
    return session_key_for(message, group_per_user=per_user)


SERVERS = """  mcp_servers:
    - name: files
      command: files-server
      exclude: [delete_*]
    - name: shell
      command: shell-server
      allow:
        - {platforms: [telegram], users: ["111"]}
"""


def test_a_server_without_rules_is_offered_to_everyone_and_one_with_a_user_rule_to_that_user_only(
    tmp_path: Path,
) -> None:
    access = ToolAccess(settings(tmp_path, SERVERS).tools,
                        registry_with(files=("read_file", "delete_file"), shell=("run",)))  # fmt: skip
    everything_but_delete = (*BUILT_IN, "files__read_file", "shell__run")
    assert access(key("111")) == everything_but_delete
    assert access(key("222")) == (*BUILT_IN, "files__read_file")
    assert access(key("111", platform="discord")) == (*BUILT_IN, "files__read_file")  # the rule says telegram
    assert access(key("111", chat="-100", chat_type=ChatType.GROUP)) == everything_but_delete  # per-user group session


def test_rules_match_chats_and_grant_tools_by_their_own_names(tmp_path: Path) -> None:
    loaded = settings(tmp_path, """  mcp_servers:
    - name: github
      url: https://mcp.example.org/mcp
      allow:
        - {users: ["111"]}
        - {tools: ["search_*"]}
        - {chats: ["-100"], tools: ["read_*"]}
""")  # fmt: skip
    access = ToolAccess(loaded.tools, registry_with(github=("search_issues", "read_issue", "merge_pr")))
    assert access(key("111")) == (*BUILT_IN, "github__search_issues", "github__read_issue", "github__merge_pr")
    assert access(key("222")) == (*BUILT_IN, "github__search_issues")
    assert access(key("222", chat="-100", chat_type=ChatType.GROUP)) == (
        *BUILT_IN, "github__search_issues", "github__read_issue"
    )  # fmt: skip
    assert access(key("222", chat="-200", chat_type=ChatType.GROUP)) == (*BUILT_IN, "github__search_issues")


def test_a_shared_session_gets_only_what_rules_without_users_grant(tmp_path: Path) -> None:
    loaded = settings(tmp_path, """  mcp_servers:
    - name: shell
      command: shell-server
      allow: [{users: ["111"]}]
    - name: github
      url: https://mcp.example.org/mcp
      allow:
        - {users: ["111"]}
        - {chats: ["-100"], tools: ["search_*"]}
""")  # fmt: skip
    with capture_logs() as logs:
        access = ToolAccess(loaded.tools, registry_with(shell=("run",), github=("search_issues", "merge_pr")))
    thread = key("111", chat="-100", chat_type=ChatType.GROUP, thread="7")
    whole_group = key("111", chat="-100", chat_type=ChatType.GROUP, per_user=False)
    assert thread.shared and whole_group.shared
    for shared in (thread, whole_group):  # the operator asks, but everyone in the chat would read the results
        assert access(shared) == (*BUILT_IN, "github__search_issues")
    assert access(key("111", chat="-100", chat_type=ChatType.GROUP)) == (
        *BUILT_IN, "shell__run", "github__search_issues", "github__merge_pr"
    )  # fmt: skip
    said = [entry for entry in logs if entry["event"] == "tools.access.personal_only"]
    assert [entry["server"] for entry in said] == ["shell"]
    assert said[0]["log_level"] == "info" and "threads" in said[0]["hint"]


def test_tools_of_a_disabled_or_unknown_server_are_never_offered_and_changes_show_at_the_next_session(
    tmp_path: Path,
) -> None:
    loaded = settings(tmp_path, """  mcp_servers:
    - {name: files, command: files-server}
    - {name: old, command: old-server, enabled: false}
""")  # fmt: skip
    registry = registry_with(files=("read_file",), old=("run",), stray=("run",))
    access = ToolAccess(loaded.tools, registry)
    assert access(key("111")) == (*BUILT_IN, "files__read_file")
    registry.replace("files", [ServerTool("files", "list_dir")])
    assert access(key("111")) == (*BUILT_IN, "files__list_dir")


def test_check_warns_about_rules_naming_users_the_platform_does_not_let_in(tmp_path: Path) -> None:
    rules = """  mcp_servers:
    - name: shell
      command: shell-server
      allow:
        - {platforms: [telegram], users: ["111", "999"]}
        - {platforms: [discord], users: ["4242"]}
        - {users: ["111"]}
        - {users: ["777"]}
"""
    platforms = '  telegram: {allowed_users: ["111"]}\n  discord: {allow_all: true}'
    assert tool_rule_warnings(settings(tmp_path, rules, platforms)) == [
        "tools.mcp_servers.0.allow.0 (server shell) names user 999, not in platforms.telegram.allowed_users "
        "(and allow_all is off): unless approved through pairing they cannot talk to the bot, so the rule gives "
        "them nothing; check the ids, or add them to allowed_users",
    ]  # discord lets everyone in; the rule without platforms may mean a discord user 777

    (tmp_path / "config.yaml").write_text(
        'platforms:\n  telegram: {token: "1:a", allowed_users: ["111"]}\n'
        'tools:\n  mcp_servers:\n    - {name: shell, command: sh, allow: [{users: ["111", "999", "998"]}]}\n',
        encoding="utf-8")  # fmt: skip
    done = switchboard("check", home=tmp_path, ANTHROPIC_API_KEY="sk-test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "Warnings:\n  - tools.mcp_servers.0.allow.0 (server shell) names users 999, 998, not in "
        "platforms.telegram.allowed_users or platforms.discord.allowed_users or platforms.slack.allowed_users "
        "(and allow_all is off): "
    ) in done.stdout
