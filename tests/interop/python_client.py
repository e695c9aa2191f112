"""Interop check: the official MCP Python SDK talks to a Bulkhead server over Streamable HTTP.

Usage: python_client.py URL TOKEN. Prints one JSON object with what it saw; exits non-zero on failure.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools = await session.list_tools()
                wrote = await session.call_tool("write_file", {"path": "/workspace/py.txt", "content": "from python"})
                read_back = await session.call_tool("read_file", {"path": "/workspace/py.txt"})
                bad = await session.call_tool("read_file", {})
                out = {
                    "server": init.server_info.name,
                    "tools": sorted(t.name for t in tools.tools),
                    "write_error": wrote.is_error,
                    "read_text": read_back.content[0].text,
                    "read_meta": read_back.meta,
                    "bad_error": bad.is_error,
                    "bad_text": bad.content[0].text,
                }
                print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
