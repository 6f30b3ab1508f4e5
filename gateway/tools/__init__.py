"""The gateway's side of the agent's tools: tool servers (MCP), who is offered which tool, and asking first."""
