"""A small MCP server for the tests, written with the same SDK the gateway's client uses.

Run it over stdio, as the gateway starts a local server (``command: python``, ``args: [-m,
tests.fakes.mcp_server]``), or over streamable HTTP on 127.0.0.1 (``--http``: it prints its URL as
the first line on stdout; ``--port N`` for a given port; :func:`serve_http` starts it as a subprocess and reads it). Its tools
(``tools.py``): ``lookup`` (a normal one), ``slow``, ``fail``, ``picture``, ``long_text``,
``document`` (a resource), ``environment`` and ``where`` (the process's variables and
working directory), ``crash`` (the process exits mid-call) and ``add_tool`` (the list
changes and the client is told).
"""

from tests.fakes.mcp_server.launch import HttpServer, serve_http, stdio_command
from tests.fakes.mcp_server.tools import FACTS, PICTURE, build_server

__all__ = ["FACTS", "PICTURE", "HttpServer", "build_server", "serve_http", "stdio_command"]
