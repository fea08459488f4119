"""A ticket service as an MCP server (stdio, offline), for the MCP tool tests.

Its tools carry MCP annotations the way servers publish them:

- ``get_ticket``: ``readOnlyHint`` (a read);
- ``close_ticket``: ``destructiveHint`` (an external side effect);
- ``tag_ticket``: ``destructiveHint`` and ``idempotentHint``;
- ``ticket_status``: no annotations (undeclared), answering with two content blocks.

Every call that changes something appends a line to the file ``$MCP_EFFECTS`` names, so a test
counts the real side effects across server processes. ``$MCP_SECRET`` is the card number ticket
T1 holds (empty: the world where it was never there).
"""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP
from mcp.types import TextContent, ToolAnnotations

mcp = FastMCP("tickets", log_level="WARNING")


def _effect(line: str) -> None:
    path = os.environ.get("MCP_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_ticket(ticket: str) -> str:
    """Look up a support ticket."""
    records = {"T1": f"ticket T1: card {os.environ.get('MCP_SECRET', '')} on file", "T2": "ticket T2: blender broken"}
    return records.get(ticket, f"ticket {ticket}: unknown")


@mcp.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def close_ticket(ticket: str) -> str:
    """Close a support ticket (the customer is told)."""
    _effect(f"close:{ticket}")
    return f"ticket {ticket} closed"


@mcp.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=True, readOnlyHint=False))
def tag_ticket(ticket: str, tag: str) -> str:
    """Tag a support ticket."""
    _effect(f"tag:{ticket}:{tag}")
    return f"ticket {ticket} tagged {tag}"


@mcp.tool()
def ticket_status(ticket: str) -> list[TextContent]:
    """The status of a ticket (two parts)."""
    _effect(f"status:{ticket}")
    return [TextContent(type="text", text=f"ticket {ticket}: "), TextContent(type="text", text="open")]


if __name__ == "__main__":
    mcp.run("stdio")
