"""``python -m tests.fakes.mcp_server [--http [--port N]]``: the fake MCP server over stdio, or over HTTP on 127.0.0.1.

With ``FAKE_MCP_STARTS`` set to a file's path, each start appends its process id to that file (a
test counts the starts, and checks that no server outlives the gateway).
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
import uvicorn

from tests.fakes.mcp_server.tools import add_http_tools, build_server


async def serve_http(port: int) -> None:
    """Listen on ``port`` (0: a free one) of 127.0.0.1, print the endpoint's URL, serve until terminated."""
    server = build_server()
    add_http_tools(server)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)  # connections wait in the backlog until uvicorn accepts them
    port = listener.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await web.serve(sockets=[listener])


def main(argv: list[str]) -> None:
    if starts := os.environ.get("FAKE_MCP_STARTS"):
        with open(starts, "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()}\n")
    if "--http" in argv:
        port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 0
        anyio.run(serve_http, port)
    else:
        build_server().run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
