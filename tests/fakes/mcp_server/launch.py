"""Starting the fake MCP server: the stdio command line for a config, or an HTTP server subprocess."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def stdio_command(starts: Path | None = None) -> dict[str, object]:
    """The ``tools.mcp_servers`` keys that start the fake server over stdio (name and the rest are the test's);
    ``starts``: the file each start appends its process id to."""
    env = {"PYTHONPATH": str(REPO)} | ({"FAKE_MCP_STARTS": str(starts)} if starts is not None else {})
    return {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "env": env}


@dataclass
class HttpServer:
    """The fake server running over streamable HTTP in a subprocess of its own."""

    process: subprocess.Popen[str]
    url: str
    """``http://127.0.0.1:PORT/mcp``"""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def serve_http(port: int = 0) -> HttpServer:
    """Start the fake server over streamable HTTP on ``port`` (0: a free one) of 127.0.0.1; call ``stop()`` when done."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.mcp_server", "--http", "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline().strip()  # the server's first line, written once it listens
    if not line.startswith("http://"):
        process.kill()
        process.wait()
        raise RuntimeError(f"the fake MCP server did not start over HTTP (it wrote {line!r})")
    return HttpServer(process, line)
