"""Interop check: the official MCP Python SDK reaches a server through `bulkhead connect` over
stdio in every protocol mode it has, calling tools and answering (or not) the approval of
`delete_file` (`approval: always`).

Usage: connect_client.py MODE COMMAND [ARG...]
MODE: `legacy` (initialize, 2025-11-25), `2026-07-28` (adopted directly) or `auto` (discover,
falling back to initialize). COMMAND is the `bulkhead connect` command line; the environment
(BULKHEAD_TOKEN) is passed on.
Prints one line `ok <mode> <case>` per case that behaved; raises (non-zero exit) at the first that
did not.
"""

import asyncio
import os
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters

ASKED = []


async def accept(ctx, params):
    ASKED.append(params.message)
    return types.ElicitResult(action="accept", content={"approve": True})


async def decline(ctx, params):
    ASKED.append(params.message)
    return types.ElicitResult(action="decline")


def text(r) -> str:
    return r.content[0].text if r.content else ""


async def write(c, path):
    r = await c.call_tool("write_file", {"path": path, "content": "keep me"})
    assert not r.is_error, text(r)


async def exists(c, path) -> bool:
    r = await c.call_tool("read_file", {"path": path})
    return not r.is_error


async def main(mode, command):
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    era = "2025-11-25" if mode == "legacy" else "2026-07-28"

    def client(callback):
        kwargs = {"elicitation_callback": callback} if callback else {}
        return Client(server, mode=mode, **kwargs)

    async with client(accept) as c:
        assert c.protocol_version == era, (mode, c.protocol_version)
        tools = await c.list_tools()
        assert any(t.name == "delete_file" for t in tools.tools), tools
        await write(c, f"/workspace/{mode}-a.txt")
        r = await c.call_tool("read_file", {"path": f"/workspace/{mode}-a.txt"})
        assert not r.is_error and "keep me" in text(r), text(r)
        print(f"ok {mode} negotiates {era} and calls tools")
        r = await c.call_tool("delete_file", {"path": f"/workspace/{mode}-a.txt"})
        assert not r.is_error, text(r)
        assert not await exists(c, f"/workspace/{mode}-a.txt")
        assert ASKED and "delete_file" in ASKED[-1] and f"{mode}-a.txt" in ASKED[-1], ASKED
        print(f"ok {mode} accept runs the call once, after showing the tool and its arguments")
    async with client(decline) as c:
        await write(c, f"/workspace/{mode}-d.txt")
        r = await c.call_tool("delete_file", {"path": f"/workspace/{mode}-d.txt"})
        assert r.is_error and "declined" in text(r), text(r)
        assert await exists(c, f"/workspace/{mode}-d.txt")
        print(f"ok {mode} decline refuses and the file stays")
    async with client(None) as c:
        await write(c, f"/workspace/{mode}-n.txt")
        try:
            r = await c.call_tool("delete_file", {"path": f"/workspace/{mode}-n.txt"})
            # 2025: the bridge tells the instance nobody can be asked; it refuses.
            assert r.is_error, f"a client without elicitation got a result: {text(r)}"
        except Exception as e:  # 2026-07-28: the SDK cannot answer the question
            assert mode != "legacy", repr(e)
            assert "elicitation" in str(e).lower(), repr(e)
        assert await exists(c, f"/workspace/{mode}-n.txt")
        print(f"ok {mode} without elicitation nothing runs")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
