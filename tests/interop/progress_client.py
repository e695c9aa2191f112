"""Interop check: progress, client logging and cancellation through the official MCP Python SDK.

Usage: progress_client.py URL TOKEN. Sets the session's log level to `warning`, starts a large
`search_logs` with a progress callback, and cancels it (the SDK's own cancellation: abandoning the
request sends `notifications/cancelled` or closes the request's stream, by protocol version) once
two progress notifications arrived. Keeps the session open for a second after the cancel (the
caller samples the server's reads meanwhile), then checks the server still answers. Prints one JSON
object with what it saw and the Unix time of the cancel.
"""

import asyncio
import json
import sys
import time

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str) -> None:
    progress = []
    logs = []
    two = anyio.Event()

    async def on_progress(done, total, message):
        progress.append({"done": done, "total": total, "message": message})
        if len(progress) >= 2:
            two.set()

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], logging_callback=on_log) as session:
                init = await session.initialize()
                try:
                    await session.set_logging_level("warning")
                    set_level = "ok"
                except Exception as e:  # noqa: BLE001 - reported, not fatal
                    set_level = str(e)
                finished = {}

                async def search():
                    r = await session.call_tool(
                        "search_logs",
                        {"pattern": "NEEDLE_NEVER_WRITTEN"},
                        progress_callback=on_progress,
                    )
                    finished["result"] = r.content[0].text if r.content else None

                started = time.time()
                cancel_at = None
                async with anyio.create_task_group() as tg:
                    tg.start_soon(search)
                    with anyio.move_on_after(120):
                        await two.wait()
                    cancel_at = time.time()
                    tg.cancel_scope.cancel()
                await anyio.sleep(1.0)
                # The server is fine after a cancelled call.
                after = await session.call_tool("read_file", {"path": "/workspace/none.txt"})
                print(
                    json.dumps(
                        {
                            "protocol": str(init.protocol_version),
                            "set_level": set_level,
                            "progress": progress,
                            "logs": logs,
                            "finished": finished,
                            "started_at": started,
                            "cancel_at": cancel_at,
                            "after_is_error": after.is_error,
                            "after_text": after.content[0].text if after.content else None,
                        }
                    )
                )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
