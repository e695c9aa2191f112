"""A new project's starter tool, through the official MCP Python SDK over Streamable HTTP.

Usage: starter_client.py URL TOKEN SERVER. Prints `ok <what>` per check; exits non-zero on failure.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, server: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == f"bulkhead-{server}", init.server_info.name
                print("ok initialize", init.server_info.name)
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                assert tools == ["hello", "read_file"], tools
                print("ok tools", tools)
                hello = await session.call_tool("hello", {"text": "from python"})
                assert not hello.is_error and hello.content[0].text == "hello: from python", hello
                print("ok hello", hello.content[0].text)
                bad = await session.call_tool("hello", {"txt": "typo"})
                assert bad.is_error, bad
                print("ok refused", bad.content[0].text[:80])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
