"""The seeds' scenarios from an agent container on a compose deployment's `agents` network, with the
official MCP Python SDK, as an isolating client: each call goes to the instance the session's level
needs, one way, read from the structured `_meta` of tools/list and of every reply (never text).

Usage: compose_agent.py FULL_URL PROXIED_URL ISOLATED_URL ALICE_TOKEN BOB_TOKEN
The two tokens are the identity provider's (here the development key's); the agent host first
exchanges each at the deployment's token service for a session token of a fresh session (RFC 8693),
and runs every scenario with those.
Prints one line per scenario ("ok <n> <name>" or "FAIL <n> <name>: why") and exits non-zero when
any failed.
"""

import asyncio
import contextlib
import json
import sys
import urllib.parse
import urllib.request

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MODES = ["full", "proxied", "none"]
REQUIRED = {"public": "full", "internal": "full", "confidential": "proxied", "secret": "none"}


def text(r):
    return "".join(c.text for c in r.content if getattr(c, "text", None) is not None)


def meta(r, key):
    return (r.meta or {}).get(key)


class Instance:
    """One MCP session with one instance."""

    def __init__(self, stack, url, token):
        self.stack, self.url, self.token = stack, url, token
        self.session = None

    async def open(self):
        if self.session is None:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
            await self.stack.enter_async_context(http)
            streams = await self.stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            self.session = await self.stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await self.session.initialize()
        return self.session


class IsolatingAgent:
    """Routes every call by the session's level, one way."""

    def __init__(self, stack, urls, token):
        self.instances = {m: Instance(stack, u, token) for m, u in urls.items()}
        self.floor = "full"
        self.declared = {}
        self.answered_by = None

    def raise_to(self, mode):
        if mode in MODES and MODES.index(mode) > MODES.index(self.floor):
            self.floor = mode

    async def start(self):
        s = await self.instances["full"].open()
        tools = await s.list_tools()
        self.declared = {t.name: (t.meta or {}).get("bulkhead/sensitivity", "public") for t in tools.tools}
        return sorted(self.declared)

    async def call(self, tool, args):
        self.raise_to(REQUIRED.get(self.declared.get(tool, "public"), "full"))
        for _ in range(3):
            mode = self.floor
            r = await (await self.instances[mode].open()).call_tool(tool, args)
            self.raise_to(REQUIRED.get(meta(r, "bulkhead/sensitivity"), "full"))
            required = meta(r, "bulkhead/required_mode")
            if r.is_error and required and MODES.index(required) > MODES.index(mode):
                self.raise_to(required)
                continue
            self.answered_by = mode
            return r
        raise RuntimeError(f"{tool}: kept being sent elsewhere")


def exchange(full, provider_token):
    """A session token for a new conversation from the provider's token (POST /token)."""
    form = urllib.parse.urlencode({
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": provider_token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }).encode()
    endpoint = full.removesuffix("/mcp") + "/token"
    with urllib.request.urlopen(urllib.request.Request(endpoint, data=form), timeout=30) as r:
        return json.load(r)


async def main(full, proxied, isolated, alice, bob):
    urls = {"full": full, "proxied": proxied, "none": isolated}
    results = []

    def check(name, ok, why=""):
        results.append(ok)
        print(("ok" if ok else "FAIL") + f" {len(results)} {name}" + ("" if ok else f": {why}"), flush=True)

    issued = [exchange(full, alice), exchange(full, bob)]
    check("the provider's tokens are exchanged for session tokens of fresh sessions",
          all(i.get("token_type") == "Bearer" for i in issued)
          and issued[0]["session_id"] != issued[1]["session_id"], issued)
    alice, bob = issued[0]["access_token"], issued[1]["access_token"]

    async with contextlib.AsyncExitStack() as stack:
        agent = IsolatingAgent(stack, urls, alice)
        tools = await agent.start()
        check("tools/list shows every declared tool", {"read_file", "write_file", "notify_team", "search_records",
              "load_sensitive_dataset", "search_security_logs"} <= set(tools), tools)

        r = await agent.call("write_file", {"path": "/workspace/notes.txt", "content": "meeting at 10"})
        check("write a note (full instance)", not r.is_error and agent.answered_by == "full", text(r))
        r = await agent.call("read_file", {"path": "/workspace/notes.txt"})
        check("read it back", not r.is_error and "meeting at 10" in text(r), text(r))
        r = await agent.call("notify_team", {"channel": "ops", "message": "starting"})
        check("connect tool while public reaches the webhook", not r.is_error and "delivered" in text(r), text(r))
        r = await agent.call("read_file", {})
        check("bad arguments are a retryable tool error", r.is_error and not text(r).startswith("[FATAL]"), text(r))
        r = await agent.call("read_file", {"path": "/workspace/../../etc/passwd"})
        check("traversal is refused", r.is_error and "root:" not in text(r), text(r))

        r = await agent.call("search_records", {"query": ""})
        check("empty query: retryable error on the proxied instance",
              r.is_error and not text(r).startswith("[FATAL]") and agent.answered_by == "proxied", text(r))
        r = await agent.call("load_sensitive_dataset", {"dataset_name": "customers_2026"})
        check("a sensitive load raises the session to confidential",
              not r.is_error and meta(r, "bulkhead/sensitivity") == "confidential", (text(r), r.meta))
        r = await agent.call("search_records", {"query": "Acme", "limit": 3})
        check("confidential rows on the proxied instance", not r.is_error and agent.answered_by == "proxied", text(r))
        r = await agent.call("notify_team", {"channel": "ops", "message": "customer list attached"})
        check("connect is blocked once the session holds private data", r.is_error and text(r).startswith("[FATAL]"), text(r))
        r = await agent.call("read_file", {"path": "/workspace/notes.txt"})
        check("earlier files still readable after the move", not r.is_error and "meeting at 10" in text(r)
              and agent.answered_by == "proxied", text(r))

        stale = Instance(stack, full, alice)
        r = await (await stale.open()).call_tool("read_file", {"path": "/workspace/notes.txt"})
        check("a client that never switched is refused by the full instance",
              r.is_error and meta(r, "bulkhead/required_mode") == "proxied", (text(r), r.meta))

        r = await agent.call("search_security_logs", {"pattern": "."})
        check("a secret search moves the session to the isolated instance",
              not r.is_error and agent.answered_by == "none" and meta(r, "bulkhead/sensitivity") == "secret", text(r))
        r = await agent.call("read_file", {"path": "/workspace/notes.txt"})
        check("files follow to the isolated instance", not r.is_error and "meeting at 10" in text(r), text(r))
        stale_proxied = Instance(stack, proxied, alice)
        r = await (await stale_proxied.open()).call_tool("search_records", {"query": "Acme"})
        check("the proxied instance refuses the secret session",
              r.is_error and meta(r, "bulkhead/required_mode") == "none", (text(r), r.meta))

        # Bob's session is public: policy lets notify_team run on the proxied instance, and the
        # webhook's host is on the allowlist, so it goes out through squid and arrives.
        b = Instance(stack, proxied, bob)
        r = await (await b.open()).call_tool("notify_team", {"channel": "ops", "message": "via squid"})
        check("the proxied instance reaches the allowlisted webhook through squid", not r.is_error and "delivered" in text(r), text(r))

    if not all(results):
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
