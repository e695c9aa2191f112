"""Interop check: the official MCP Python SDK's OAuth client signs in through Bulkhead's
authorization server, which sends the user on to a real OpenID provider (tests/interop/oidc).

Usage: oauth_client.py URL LOGIN WAIT_SECS. Two conversations of LOGIN, each with its own OAuth
flow (discovery from the 401, dynamic registration, authorization code + PKCE, `iss` checked,
code exchange). The first loads a confidential dataset, the second reads; then the first waits
WAIT_SECS (past its token's expiry) and calls again, so the SDK refreshes. Prints one JSON object
with each token's claims and each call's level; exits non-zero on failure.
"""

import base64
import json
import os
import sys
import time
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oidc"))
import browser  # noqa: E402  (the scripted user agent beside the provider)

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never fetched: the browser stops at it


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def claims(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


class Conversation:
    """One agent conversation: its own OAuth flow and token storage."""

    def __init__(self, url: str, login: str) -> None:
        self.url, self.login, self.storage, self.final = url, login, Memory(), None
        self.auth = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name="bulkhead-interop",
                redirect_uris=[REDIRECT_URI],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self.redirect,
            callback_handler=self.callback,
        )

    async def redirect(self, authorization_url: str) -> None:
        self.final = await anyio.to_thread.run_sync(
            browser.follow, authorization_url, self.login, REDIRECT_URI
        )

    async def callback(self) -> AuthorizationCodeResult:
        q = parse_qs(urlparse(self.final).query)
        if "error" in q:
            raise RuntimeError(f"sign-in failed: {q}")
        return AuthorizationCodeResult(
            code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0]
        )

    async def call(self, tool: str, args: dict) -> dict:
        async with httpx2.AsyncClient(auth=self.auth, timeout=httpx2.Timeout(30, read=60)) as http:
            async with Client(streamable_http_client(self.url, http_client=http)) as client:
                result = await client.call_tool(tool, args)
                meta = result.meta or {}
                return {
                    "error": bool(result.is_error),
                    "text": result.content[0].text if result.content else "",
                    "level": meta.get("bulkhead/sensitivity"),
                }

    def token_claims(self) -> dict:
        return claims(self.storage.tokens.access_token)


async def main(url: str, login: str, wait: float) -> None:
    first, second = Conversation(url, login), Conversation(url, login)
    loaded = await first.call("load_sensitive_dataset", {"dataset_name": "customers"})
    read = await second.call("read_file", {"path": "/workspace/none.txt"})
    before = first.token_claims()
    refresh_before = first.storage.tokens.refresh_token
    time.sleep(wait)
    again = await first.call("read_file", {"path": "/workspace/none.txt"})
    after = first.token_claims()
    print(json.dumps({
        "first": before,
        "second": second.token_claims(),
        "refreshed": after,
        "refresh_token_was_issued": bool(refresh_before),
        "token_changed": first.storage.tokens.access_token != "" and before != after,
        "loaded": loaded,
        "second_read": read,
        "first_read_after_refresh": again,
        "client_id_is_sealed": len(first.storage.client_info.client_id) > 40,
    }))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]))
