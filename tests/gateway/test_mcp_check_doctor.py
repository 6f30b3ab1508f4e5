"""``switchboard check`` and ``switchboard doctor`` with tool servers configured, as an operator runs them."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.mcp_server import stdio_command
from tests.fakes.model_server import ModelServer
from tests.gateway.processes import REPO, clean_env, switchboard

TOKEN = "ghp-secret-token-0123456789"


def write(home: Path, servers: list[dict[str, Any]], model: ModelServer | None = None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"tools": {"mcp_servers": servers}, "health": {"port": 0}}
    if model is not None:
        config["model"] = {"provider": "anthropic", "name": "claude-sonnet-4-6", "base_url": model.base_url}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def test_check_lists_each_server_its_tool_filters_and_who_gets_them_without_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home, [
        {"name": "github", "url": "https://mcp.example.org/github/mcp?key=abc", "headers": {"Authorization": "Bearer ${GH}"},
         "include": ["search_*", "get_*"], "exclude": ["get_secret"], "confirm": ["create_*"], "timeout": 20,
         "allow": [{"platforms": ["telegram"], "users": [123]}, {"tools": ["search_*"]}]},
        {"name": "shell", "command": "shell-mcp", "args": ["--root", "/srv"], "env": {"SHELL_KEY": "${SK}"},
         "cwd": "tools", "enabled": False, "confirm": True},
    ])  # fmt: skip

    result = switchboard("check", home=home, ANTHROPIC_API_KEY="k", GH=TOKEN, SK="shell-secret-42")

    out = result.stdout
    assert TOKEN not in out and "shell-secret-42" not in out and "abc" not in out, out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  tool servers"))
    assert lines[start + 1:start + 7] == [
        "    github on   streamable HTTP https://mcp.example.org/github/mcp?[REDACTED], headers Authorization; "
        "calls time out after 20 s, start within 30 s",
        "                tools: search_*, get_* except get_secret; ask first: create_*",
        "                who: on telegram users 123: all tools | on any platform: tools search_*",
        "    shell  off  local command `shell-mcp --root /srv` in tools (under the home), variables SHELL_KEY; "
        "calls time out after 60 s, start within 30 s",
        "                tools: all; ask first: every tool",
        "                who: everyone allowed to talk to the bot",
    ], out


async def test_doctor_starts_each_server_lists_its_tools_calls_none_and_names_the_fix(
    tmp_path: Path, model_server: ModelServer
) -> None:
    home, starts = tmp_path / "home", tmp_path / "starts"
    write(home, [
        {"name": "fake", **stdio_command(starts), "exclude": ["crash"]},
        {"name": "broken", "command": "/nonexistent/mcp-server"},
        {"name": "later", **stdio_command(starts), "enabled": False},
    ], model_server)  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.operations.cli", "doctor", cwd=REPO, env=clean_env(home, ANTHROPIC_API_KEY="k"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate()
    lines = {line.split()[1]: line for line in out.decode().splitlines() if line.startswith(("ok", "FAIL", "skip"))}

    assert process.returncode == 1
    assert lines["mcp:fake"].startswith("ok  ")
    assert "started over stdio, 9 tools offered (1 of its 10 left out by include/exclude or a bad schema): lookup, slow" in (
        lines["mcp:fake"]
    )
    assert lines["mcp:fake"].endswith("; none called")
    assert lines["mcp:broken"].startswith("FAIL")
    assert "did not start over stdio: the program '/nonexistent/mcp-server' was not found. Fix: check command" in (
        lines["mcp:broken"]
    )
    assert lines["mcp:later"].startswith("skip") and "enabled: false" in lines["mcp:later"]
    assert len(starts.read_text().split()) == 1  # the enabled one, started once; the disabled one never
