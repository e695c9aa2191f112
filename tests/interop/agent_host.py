"""The README's agent-host example: one token exchange per conversation (RFC 8693), then the
official MCP Python SDK with the session token. Each conversation is its own session, so its own
ratchet, at every server of the deployment.

Usage: agent_host.py MCP_URL PROVIDER_TOKEN. Prints one JSON object; exits non-zero on failure.
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"


async def session_token(token_endpoint: str, provider_token: str) -> dict:
    """A session token for a new conversation: the user's provider token in, Bulkhead's out."""
    async with httpx2.AsyncClient() as http:
        r = await http.post(token_endpoint, data={
            "grant_type": EXCHANGE,
            "subject_token": provider_token,
            "subject_token_type": ACCESS_TOKEN,
        })
        r.raise_for_status()
        return r.json()  # access_token, refresh_token, expires_in, session_id


async def conversation(url: str, token: str, level_tool: str, args: dict) -> dict:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool(level_tool, args)
            return {"error": result.is_error, "level": (result.meta or {}).get("bulkhead/sensitivity")}


async def main(url: str, provider_token: str) -> None:
    token_endpoint = url.removesuffix("/mcp") + "/token"
    first = await session_token(token_endpoint, provider_token)
    second = await session_token(token_endpoint, provider_token)
    loaded = await conversation(url, first["access_token"], "load_sensitive_dataset",
                                {"dataset_name": "customers"})
    other = await conversation(url, second["access_token"], "read_file",
                               {"path": "/workspace/none.txt"})
    print(json.dumps({"sessions": [first["session_id"], second["session_id"]],
                      "loaded": loaded, "other": other}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
