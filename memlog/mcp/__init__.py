"""The MCP face: memlog's tools for an agent, bound to one subject and agent."""
