"""Interop check: the official MCP Python SDK approves (or not) calls of `delete_file`, a tool
with `approval: always`, on both protocol eras.

Usage: approval_client.py URL TOKEN THIRD SCENARIO
SCENARIO: `all` (every case but expiry; THIRD: a token of another session of the same user),
`expiry` (an answer after the question expired; run against a server whose
`approvals.expiry_secs` is 1) or `race` (THIRD: the URL of a second replica; one answer sent to
both at once runs the call once).
Prints one line `ok <case>` per case that behaved; raises (non-zero exit) at the first that did not.
"""

import asyncio
import sys

import mcp_types as types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text(r) -> str:
    return r.content[0].text if r.content else ""


async def accept(ctx, params):
    return types.ElicitResult(action="accept", content={"approve": True})


async def decline(ctx, params):
    return types.ElicitResult(action="decline")


async def accept_without_approving(ctx, params):
    return types.ElicitResult(action="accept", content={"approve": False})


ASKED = []


async def accept_and_record(ctx, params):
    ASKED.append(params.message)
    return types.ElicitResult(action="accept", content={"approve": True})


class Legacy:
    """A 2025-11-25 session (initialize, transport session) with the given callback."""

    def __init__(self, url, token, callback):
        self.url, self.token, self.callback = url, token, callback

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        await self.http.__aenter__()
        self.streams_cm = streamable_http_client(self.url, http_client=self.http)
        streams = await self.streams_cm.__aenter__()
        kwargs = {"elicitation_callback": self.callback} if self.callback else {}
        self.session_cm = ClientSession(streams[0], streams[1], **kwargs)
        self.session = await self.session_cm.__aenter__()
        init = await self.session.initialize()
        assert init.protocol_version == "2025-11-25", init.protocol_version
        return self.session

    async def __aexit__(self, *exc):
        await self.session_cm.__aexit__(*exc)
        await self.streams_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)


class Modern:
    """A 2026-07-28 client (no transport session) with the given callback."""

    def __init__(self, url, token, callback):
        self.url, self.token, self.callback = url, token, callback

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        await self.http.__aenter__()
        kwargs = {"elicitation_callback": self.callback} if self.callback else {}
        self.client_cm = Client(
            streamable_http_client(self.url, http_client=self.http), mode="2026-07-28", **kwargs
        )
        self.client = await self.client_cm.__aenter__()
        assert self.client.protocol_version == "2026-07-28", self.client.protocol_version
        return self.client

    async def __aexit__(self, *exc):
        await self.client_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)


async def write(c, path):
    r = await c.call_tool("write_file", {"path": path, "content": "keep me"})
    assert not r.is_error, text(r)


async def exists(c, path) -> bool:
    r = await c.call_tool("read_file", {"path": path})
    return not r.is_error


async def legacy_cases(url, token):
    async with Legacy(url, token, accept_and_record) as s:
        await write(s, "/workspace/l1.txt")
        r = await s.call_tool("delete_file", {"path": "/workspace/l1.txt"})
        assert not r.is_error, text(r)
        assert not await exists(s, "/workspace/l1.txt")
        assert "delete_file" in ASKED[-1] and "/workspace/l1.txt" in ASKED[-1], ASKED
        print("ok 2025 accept runs the call once, after showing the tool and its arguments")
    async with Legacy(url, token, decline) as s:
        await write(s, "/workspace/l2.txt")
        r = await s.call_tool("delete_file", {"path": "/workspace/l2.txt"})
        assert r.is_error and "declined" in text(r) and text(r).startswith("[FATAL]"), text(r)
        assert await exists(s, "/workspace/l2.txt")
        print("ok 2025 decline refuses and the file stays")
    async with Legacy(url, token, accept_without_approving) as s:
        await write(s, "/workspace/l3.txt")
        r = await s.call_tool("delete_file", {"path": "/workspace/l3.txt"})
        assert r.is_error and "without approving" in text(r), text(r)
        assert await exists(s, "/workspace/l3.txt")
        print("ok 2025 accept with approve false refuses")
    async with Legacy(url, token, None) as s:
        await write(s, "/workspace/l4.txt")
        r = await s.call_tool("delete_file", {"path": "/workspace/l4.txt"})
        assert r.is_error and "cannot be asked" in text(r), text(r)
        assert await exists(s, "/workspace/l4.txt")
        print("ok 2025 no elicitation callback refuses")


async def modern_cases(url, token, other_token):
    async with Modern(url, token, accept) as c:
        await write(c, "/workspace/m1.txt")
        r = await c.call_tool("delete_file", {"path": "/workspace/m1.txt"})
        assert not r.is_error, text(r)
        assert not await exists(c, "/workspace/m1.txt")
        print("ok 2026 accept (input_required round) runs the call")
    async with Modern(url, token, decline) as c:
        await write(c, "/workspace/m2.txt")
        r = await c.call_tool("delete_file", {"path": "/workspace/m2.txt"})
        assert r.is_error and "declined" in text(r), text(r)
        assert await exists(c, "/workspace/m2.txt")
        print("ok 2026 decline refuses and the file stays")
    async with Modern(url, token, None) as c:
        await write(c, "/workspace/m3.txt")
        try:
            r = await c.call_tool("delete_file", {"path": "/workspace/m3.txt"})
            raise AssertionError(f"a client without a callback got a result: {text(r)}")
        except Exception as e:  # the SDK cannot answer the question: nothing runs
            assert "Elicitation not supported" in str(e) or "elicitation" in str(e).lower(), repr(e)
        assert await exists(c, "/workspace/m3.txt")
        print("ok 2026 no elicitation callback: nothing runs")

    yes = {"approval": {"action": "accept", "content": {"approve": True}}}
    async with Modern(url, token, accept) as c:
        s = c.session
        await write(c, "/workspace/r1.txt")
        await write(c, "/workspace/r2.txt")
        args = {"path": "/workspace/r1.txt"}
        first = await s.call_tool("delete_file", args, allow_input_required=True)
        assert first.result_type == "input_required", first
        assert "approval" in first.input_requests, first
        state = first.request_state

        edited = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
        r = await s.call_tool(
            "delete_file", args, allow_input_required=True, input_responses=yes, request_state=edited
        )
        assert r.is_error and "changed or sealed with another key" in text(r), r
        assert await exists(c, "/workspace/r1.txt")
        print("ok 2026 an edited requestState is refused")

        r = await s.call_tool(
            "delete_file",
            {"path": "/workspace/r2.txt"},
            allow_input_required=True,
            input_responses=yes,
            request_state=state,
        )
        assert r.is_error and "arguments differ" in text(r), r
        assert await exists(c, "/workspace/r2.txt")
        print("ok 2026 a requestState moved to other arguments is refused")

        r = await s.call_tool(
            "write_file",
            {"path": "/workspace/r1.txt", "content": "x"},
            allow_input_required=True,
            input_responses=yes,
            request_state=state,
        )
        # write_file asks nothing: the state is ignored and the write runs as any write.
        assert not r.is_error, r

        r = await s.call_tool(
            "delete_file", args, allow_input_required=True, input_responses=yes, request_state=state
        )
        assert not r.is_error, r
        assert not await exists(c, "/workspace/r1.txt")
        print("ok 2026 the answer with its own state runs the call")

        await write(c, "/workspace/r1.txt")
        r = await s.call_tool(
            "delete_file", args, allow_input_required=True, input_responses=yes, request_state=state
        )
        assert r.is_error and "already used" in text(r), r
        assert await exists(c, "/workspace/r1.txt")
        print("ok 2026 a replayed answer is refused")

        second = await s.call_tool("delete_file", {"path": "/workspace/r2.txt"}, allow_input_required=True)
        other_state = second.request_state
    async with Modern(url, other_token, accept) as other:
        await write(other, "/workspace/r2.txt")
        r = await other.session.call_tool(
            "delete_file",
            {"path": "/workspace/r2.txt"},
            allow_input_required=True,
            input_responses=yes,
            request_state=other_state,
        )
        assert r.is_error and "another caller or session" in text(r), r
        assert await exists(other, "/workspace/r2.txt")
        print("ok 2026 a requestState moved to another session is refused")


async def expiry_case(url, token):
    yes = {"approval": {"action": "accept", "content": {"approve": True}}}
    async with Modern(url, token, accept) as c:
        await write(c, "/workspace/e1.txt")
        args = {"path": "/workspace/e1.txt"}
        first = await c.session.call_tool("delete_file", args, allow_input_required=True)
        await asyncio.sleep(2.5)
        r = await c.session.call_tool(
            "delete_file", args, allow_input_required=True, input_responses=yes,
            request_state=first.request_state,
        )
        assert r.is_error and "expired" in text(r), r
        assert await exists(c, "/workspace/e1.txt")
        print("ok 2026 an answer after expiry is refused")


async def race_case(url, token, url_b):
    yes = {"approval": {"action": "accept", "content": {"approve": True}}}
    async with Modern(url, token, accept) as a, Modern(url_b, token, accept) as b:
        await write(a, "/workspace/race.txt")
        args = {"path": "/workspace/race.txt"}
        first = await a.session.call_tool("delete_file", args, allow_input_required=True)
        state = first.request_state
        results = await asyncio.gather(
            *[
                c.session.call_tool(
                    "delete_file", args, allow_input_required=True, input_responses=yes, request_state=state
                )
                for c in (a, b, a, b)
            ]
        )
        ran = [r for r in results if not r.is_error]
        used = [r for r in results if r.is_error and "already used" in text(r)]
        assert len(ran) == 1 and len(used) == 3, [text(r) for r in results]
        print("ok one answer sent to two replicas at once runs the call once")


async def main(url, token, third, scenario):
    if scenario == "race":
        await race_case(url, token, third)
        return
    other_token = third
    if scenario == "expiry":
        await expiry_case(url, token)
        return
    await legacy_cases(url, token)
    await modern_cases(url, token, other_token)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
