"""Interop check: the official MCP Python SDK runs `run_python` on one Bulkhead instance.

Usage: sandbox_client.py URL TOKEN CODE. Prints one JSON object (is_error, text, level); exits
non-zero on a protocol failure.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, code: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("run_python", {"code": code})
                print(json.dumps({
                    "is_error": result.is_error,
                    "text": "".join(c.text for c in result.content if c.type == "text"),
                    "level": (result.meta or {}).get("bulkhead/sensitivity"),
                }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
