"""Interop check: the official MCP Python SDK calls the tools of an imported server (OpenAPI or
Toolbox), answering approval questions with accept.

Usage: import_client.py URL TOKEN PLAN
PLAN: a JSON list of {"tool": NAME, "args": {...}}. Prints one JSON object: "tools" (each listed
tool's inputSchema), "outputs" (the outputSchemas declared) and "calls" (per call: {"error": bool, "text": str, "asked": [messages]}).
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ASKED = []


async def accept(ctx, params):
    ASKED.append(params.message)
    return types.ElicitResult(action="accept", content={"approve": True})


async def main(url, token, plan):
    out = {"tools": {}, "calls": []}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], elicitation_callback=accept) as s:
                await s.initialize()
                listed = await s.list_tools()
                out["tools"] = {t.name: t.input_schema for t in listed.tools}
                out["outputs"] = {t.name: t.output_schema for t in listed.tools if t.output_schema}
                for step in plan:
                    ASKED.clear()
                    r = await s.call_tool(step["tool"], step["args"])
                    text = r.content[0].text if r.content else ""
                    out["calls"].append({"error": bool(r.is_error), "text": text, "asked": list(ASKED)})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
