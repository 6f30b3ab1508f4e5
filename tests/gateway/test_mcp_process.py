"""Tool servers in the real ``switchboard run`` process: the log line of a call, and no server left behind.

The gateway runs as a subprocess (``tests.fakes.run_gateway``) with the out-of-process relay platform,
the fake model server and the fake MCP server over stdio, which writes each start's process id to a file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.mcp_server import stdio_command
from tests.fakes.model_server import ModelServer, Text, ToolUse
from tests.fakes.relay_platform import RelayPlatform
from tests.gateway.conftest import write_config
from tests.gateway.processes import REPO, clean_env, terminate, wait_for_log
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)  # starts the real gateway and a tool server: slow on a busy machine


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


async def test_a_call_is_logged_without_its_arguments_and_the_server_stops_with_the_gateway(
    tmp_path: Path, model_server: ModelServer, relay: RelayPlatform
) -> None:
    home, starts = tmp_path / "home", tmp_path / "starts"
    servers = [{"name": "fake", **stdio_command(starts)}, {"name": "broken", "command": "/nonexistent/mcp-server"}]
    config = write_config(home, model_server, {"tools": {"mcp_servers": servers}})
    model_server.script(ToolUse("fake__lookup", {"key": "ticket-7"}), Text("The printer is out of toner."))
    log_path = home / "logs" / "gateway.log"
    with (tmp_path / "stderr.txt").open("ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.run_gateway", "--config", str(config), "--relay", relay.base_url],
            cwd=REPO, env=clean_env(home), stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        wait_for_log(log_path, r"gateway\.started", process=process)
        await relay.post("chat-1", "what is ticket 7 about?")
        await eventually(lambda: relay.sent, "the reply", process=process)
        assert relay.sent[-1].text == "The printer is out of toner."
        line = wait_for_log(log_path, r"tool\.call .*", process=process).group(0)
    finally:
        assert await terminate(process, limit=120) == 0

    assert re.search(r"\bserver=fake\b", line) and re.search(r"\btool=lookup\b", line)
    assert re.search(r"\bms=\d+\b", line) and re.search(r"\bok=true\b", line, re.IGNORECASE)
    text = log_path.read_text("utf-8")
    assert "ticket-7" not in text  # the model's arguments are never written
    started = re.search(r"mcp\.server\.started .*", text)
    assert started and "tools=10" in started.group(0)
    failed = re.search(r"mcp\.server\.start_failed .*", text)
    assert failed and "server=broken" in failed.group(0) and "was not found" in failed.group(0)
    (pid,) = map(int, starts.read_text().split())
    assert not alive(pid)
