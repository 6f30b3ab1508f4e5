"""Tools the gateway adds to the agent's own: tool servers' tools, and who is offered which.

``mcp`` starts and supervises the MCP servers of ``tools.mcp_servers`` and puts their tools in the
agent's registry; ``access`` decides which tools a new session's person is offered (built-in tools
always, a tool server's per its ``include``/``exclude`` patterns and ``allow`` rules).
"""
