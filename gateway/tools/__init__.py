"""The gateway's side of the agent's tools: tool servers (MCP), asking before a call, who is offered what."""
