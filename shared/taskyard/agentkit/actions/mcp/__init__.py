"""MCP servers as tool sources: the tool worker's client (`client`: streamable HTTP through
the web guard, or stdio relayed into the session's sandbox), results mapped to taskyard's
(`results`), and listings between the tool worker and the agent worker (`listing`). The
modules are imported by name: the client pulls in the `mcp` SDK, which an agent worker
reading listings does not need."""

__all__: list[str] = []
