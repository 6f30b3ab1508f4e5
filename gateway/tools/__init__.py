"""Tools the gateway adds to the agent's own: tool servers' tools, who is offered which, and asking first.

``mcp`` starts and supervises the MCP servers of ``tools.mcp_servers`` and puts their tools in the
agent's registry; ``access`` decides which tools a new session's person is offered (built-in tools
always, a tool server's per its ``include``/``exclude`` patterns and ``allow`` rules); ``approval`` asks
the person in the chat before a tool marked ``confirm`` runs (Allow / Deny buttons).
"""
