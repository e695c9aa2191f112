"""Interop check: resources and prompts through the official MCP Python SDK.

Usage: resources_client.py URL TOKEN. Prints one JSON object with what it saw; declared results
are validated by the SDK against their outputSchema.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def read(session, uri):
    try:
        r = await session.read_resource(uri)
        c = r.contents[0]
        return {"text": getattr(c, "text", None), "mime": c.mime_type, "meta": r.meta}
    except Exception as e:  # a refusal arrives as a JSON-RPC error
        return {"error": str(e)}


async def main(url: str, token: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                caps = init.capabilities
                resources = await session.list_resources()
                templates = await session.list_resource_templates()
                prompts = await session.list_prompts()
                guide = await read(session, "docs://template/guide")
                record = await read(session, "records://1")
                missing = await read(session, "records://999999")
                prompt = await session.get_prompt("find_customer", {"customer": "Acme"})
                # The SDK checks structuredContent against each tool's listed outputSchema and
                # raises on a mismatch.
                rows = await session.call_tool("search_records", {"query": "Acme", "limit": 2})
                dataset = await session.call_tool("load_sensitive_dataset", {"dataset_name": "py"})
                out = {
                    "has_resources": caps.resources is not None,
                    "has_prompts": caps.prompts is not None,
                    "resources": sorted(str(r.uri) for r in resources.resources),
                    "templates": sorted(t.uri_template for t in templates.resource_templates),
                    "prompts": sorted(p.name for p in prompts.prompts),
                    "guide": guide,
                    "record": record,
                    "missing": missing,
                    "prompt_text": prompt.messages[0].content.text,
                    "rows": {"error": rows.is_error, "structured": rows.structured_content},
                    "dataset": {"error": dataset.is_error, "structured": dataset.structured_content},
                }
                print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
