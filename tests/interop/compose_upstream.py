"""Upstream MCP servers nobody here wrote (`mcp-server-time` and `mcp-server-fetch` from PyPI,
`@modelcontextprotocol/server-everything` from npm, installed in the image at their pinned
versions) behind the compose deployment's `third_party` instances, from an agent container with the
official MCP Python SDK.

Usage: compose_upstream.py FULL_URL PROXIED_URL TEMPLATE_URL TOKEN
Prints one line per check ("ok <name>" or "FAIL <name>: why") and exits non-zero when any failed.
"""

import asyncio
import contextlib
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text(r):
    return "".join(c.text for c in r.content if getattr(c, "text", None) is not None)


async def open_session(stack, url, token):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    await stack.enter_async_context(http)
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


async def main(full_url, proxied_url, template_url, token):
    failed = []

    def check(name, ok, why=""):
        print(("ok " if ok else "FAIL ") + name + ("" if ok else ": " + why), flush=True)
        if not ok:
            failed.append(name)

    meeting = {"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}
    async with contextlib.AsyncExitStack() as stack:
        full = await open_session(stack, full_url, token)
        names = sorted(t.name for t in (await full.list_tools()).tools)
        check("only declared tools are listed", names == ["annotated_message", "convert_meeting_time", "current_time", "fetch_page", "read_file"], str(names))
        # The npm upstream, imported with `npx -y` and installed in the image from its lock: the
        # spec's `message_type` reaches it as `messageType`.
        r = await full.call_tool("annotated_message", {"message_type": "error"})
        check("an npm upstream answers with its camelCase parameter", not r.is_error and "Error" in text(r), text(r)[:400])
        r = await full.call_tool("current_time", {"timezone": "Europe/Paris"})
        check("the upstream answers on full", not r.is_error and "Europe/Paris" in text(r), text(r))
        try:
            r = await full.call_tool("get_current_time", {"timezone": "UTC"})
            said, refused = text(r), r.is_error
        except Exception as e:  # a protocol error is a refusal too
            said, refused = str(e), True
        check("an undeclared upstream tool is unknown", refused and "unknown tool" in said, said)
        # The example `connect` upstream (`mcp-server-fetch`, `egress: [docs.example.com:80]` here):
        # on proxied its jail reaches the declared host through the gate and squid; on full the
        # gate resolves the name itself and refuses its benchmarking-range address.
        proxied = await open_session(stack, proxied_url, token)
        page = {"url": "http://docs.example.com/compose_upstream.py"}
        r = await proxied.call_tool("fetch_page", page)
        check("a connect upstream reaches its declared host through squid", not r.is_error and "compose_upstream.py" in text(r), text(r)[:400])
        r = await full.call_tool("fetch_page", page)
        check("a declared name resolving to a special-purpose address is refused on full", r.is_error, text(r)[:400])
        r = await full.call_tool("convert_meeting_time", meeting)
        check("the confidential tool is refused on full", r.is_error, text(r))
        r = await proxied.call_tool("convert_meeting_time", meeting)
        check("the confidential tool answers on proxied", not r.is_error and "18:30" in text(r), text(r))
        level = (r.meta or {}).get("bulkhead/level") or (r.meta or {}).get("level")
        template = await open_session(stack, template_url, token)
        r = await template.call_tool(
            "notify_team", {"channel": "ops", "message": "meeting at 18:30 Tokyo"}
        )
        check(
            "the session's level holds across servers: a connect tool is refused",
            r.is_error and text(r).startswith("[FATAL]"),
            f"{text(r)} (level {level})",
        )
        r = await proxied.call_tool("fetch_page", page)
        check("the connect upstream is refused once the session holds private data", r.is_error and text(r).startswith("[FATAL]"), text(r)[:400])
    return 1 if failed else 0


def flatten(e):
    """The leaf exceptions of an exception group (anyio wraps transport errors in one)."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in flatten(sub)]
    return [e]


if __name__ == "__main__":
    try:
        code = asyncio.run(main(*sys.argv[1:5]))
    except Exception as e:  # say what broke, not a traceback of task groups
        print("FAIL the session broke: " + "; ".join(f"{type(x).__name__}: {x}" for x in flatten(e)), flush=True)
        code = 1
    sys.exit(code)
