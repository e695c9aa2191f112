"""Interop check: credentials in a result never reach the model through the official MCP Python
SDK, and the session they raise is refused `notify_team`; a `notify_team` carrying a key is refused
naming the rule. On both protocol eras (2025-11-25 with a transport session, 2026-07-28 without)
and both server paths (a plain call takes the direct path; one with a progress callback carries
`_meta` and goes through rmcp).

A prompt rendered with a credential in its argument comes back redacted, and raises the session.

Usage: inspect_client.py URL TOKENS_JSON   (nine tokens, each of its own agent session)
Prints one line `ok <case>` per case that behaved; raises (non-zero exit) at the first that did not.
"""

import asyncio
import json
import sys

from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "j8hYs5suKcNd8Zra9A9sKPxZ9W3qLy7zKUVQDT7S8sTQCBNR3YbDgbleph1QHt61\n"
    "QTC4XATWS8PHp9NHfYjFM5DI4pZj59fhZ5R1Py4oJe2JbmPTuSgR7cMy+UcU3zr1\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiAiUlMyNTYiLCAia2lkIjogImstMjAyNi0xMSIsICJ0eXAiOiAiSldUIn0."
    "eyJzdWIiOiAiYW5hIiwgImF1ZCI6ICJjcm0iLCAiZXhwIjogMTg5MzQ1NjAwMH0."
    "xJu2jGjNGkTfi3oYv2DzaKG05Rk-GQV81rkmghzem9yPVUJa_c5q52RYfLWrLoevhZC0x0awirH_juQbLifxz5"
)
FILE = (
    "[default]\naws_access_key_id = AKIAUJZDE8GXD6NCF10E\n"
    "aws_secret_access_key = eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5\n\n"
    f"{PEM}\n\nsession: {JWT}\n"
)
VALUES = ["AKIAUJZDE8GXD6NCF10E", "eL2HPcHyGcFRl1SPnXNYvMIHa", "j8hYs5suKcNd8Zra9A9s", JWT[:40]]


def text(r) -> str:
    return r.content[0].text if r.content else ""


class Legacy:
    """A 2025-11-25 session (initialize, transport session)."""

    def __init__(self, url, token):
        self.url, self.token = url, token

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        await self.http.__aenter__()
        self.streams_cm = streamable_http_client(self.url, http_client=self.http)
        streams = await self.streams_cm.__aenter__()
        self.session_cm = ClientSession(streams[0], streams[1])
        self.session = await self.session_cm.__aenter__()
        init = await self.session.initialize()
        assert init.protocol_version == "2025-11-25", init.protocol_version
        return self.session

    async def __aexit__(self, *exc):
        await self.session_cm.__aexit__(*exc)
        await self.streams_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)


class Modern:
    """A 2026-07-28 client (no transport session)."""

    def __init__(self, url, token):
        self.url, self.token = url, token

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        await self.http.__aenter__()
        self.client_cm = Client(
            streamable_http_client(self.url, http_client=self.http), mode="2026-07-28"
        )
        self.client = await self.client_cm.__aenter__()
        assert self.client.protocol_version == "2026-07-28", self.client.protocol_version
        return self.client

    async def __aexit__(self, *exc):
        await self.client_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)


async def call(c, path, tool, args):
    if path == "rmcp":
        async def on_progress(done, total, message):
            pass

        return await c.call_tool(tool, args, progress_callback=on_progress)
    return await c.call_tool(tool, args)


async def read_back(era, path, url, token):
    async with era(url, token) as c:
        r = await call(c, path, "write_file", {"path": "/workspace/creds.ini", "content": FILE})
        assert not r.is_error, text(r)
        r = await call(c, path, "read_file", {"path": "/workspace/creds.ini"})
        assert not r.is_error, text(r)
        seen = json.dumps(r.model_dump(mode="json"))
        for v in VALUES:
            assert v not in seen, f"{v} reached the client: {seen}"
        for rule in ["aws-access-token", "aws-secret-access-key", "private-key", "jwt"]:
            assert f"[redacted: {rule}]" in text(r), text(r)
        meta = r.meta or {}
        assert meta.get("bulkhead/sensitivity") == "secret", meta
        trust = meta.get("io.modelcontextprotocol/trust-annotations")
        assert trust == {"sensitiveHint": "high", "privateHint": True}, meta
        assert "aws-secret-access-key" in meta.get("bulkhead/redacted", []), meta
        n = await call(c, path, "notify_team", {"channel": "ops", "message": "done"})
        assert n.is_error and "secret" in text(n), text(n)
    print(f"ok {era.__name__} {path}: the file read back holds none of the values and notify_team is refused naming the level")


async def send_key(era, path, url, token):
    async with era(url, token) as c:
        msg = "rotate it: aws_secret_access_key=eL2HPcHyGcFRl1SPnXNYvMIHa/2o76umfXfKm/r5"
        n = await call(c, path, "notify_team", {"channel": "ops", "message": msg})
        assert n.is_error, text(n)
        assert "aws-secret-access-key" in text(n) and "`message`" in text(n), text(n)
        assert "eL2HPcHy" not in text(n), text(n)
        assert not text(n).startswith("[FATAL]"), text(n)
    print(f"ok {era.__name__} {path}: notify_team with a key in its message is refused naming the rule")


async def prompt(url, token):
    token_value = "ghp_SmEHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8"
    async with Legacy(url, token) as c:
        p = await c.get_prompt("find_customer", {"customer": f"Acme {token_value}"})
        shown = json.dumps(p.model_dump(mode="json"))
        assert token_value not in shown and "[redacted: github-pat]" in shown, shown
        assert (p.meta or {}).get("bulkhead/sensitivity") == "secret", p.meta
        n = await c.call_tool("notify_team", {"channel": "ops", "message": "done"})
        assert n.is_error and "secret" in text(n), text(n)
    print("ok Legacy prompt: a credential in a prompt's argument is redacted and raises the session")


async def main(url, tokens):
    tokens = iter(tokens)
    for era in (Legacy, Modern):
        for path in ("direct", "rmcp"):
            await read_back(era, path, url, next(tokens))
            await send_key(era, path, url, next(tokens))
    await prompt(url, next(tokens))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
