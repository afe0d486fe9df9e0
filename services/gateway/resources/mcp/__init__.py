"""MCP at `/mcp`: each agent a tool, a call a task (`routes`); a client's cancellation of a
call reaching its task (`cancel`)."""
