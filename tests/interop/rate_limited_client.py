"""Interop check: the official MCP Python SDK meets a rate limit.

Usage: rate_limited_client.py URL TOKEN. Writes a file, then reads it four times; prints a JSON
list of {is_error, text} for the reads. Exits non-zero if the SDK raised instead.
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
                await session.initialize()
                await session.call_tool("write_file", {"path": "/workspace/r.txt", "content": "x"})
                out = []
                for _ in range(4):
                    r = await session.call_tool("read_file", {"path": "/workspace/r.txt"})
                    out.append({"is_error": r.is_error, "text": r.content[0].text})
                print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
