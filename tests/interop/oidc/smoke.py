# smoke.py - end-to-end check of provider.mjs + browser.py, stdlib only.
#   python3 tests/interop/oidc/smoke.py NODE_MODULES_DIR   (or $OIDC_NODE_MODULES)
# Starts the provider on a free port, then: discovery + JWKS, authorization code + PKCE
# (checks `iss`/`state` in the redirect), JWT access token checks (alg, kid in JWKS, claims),
# refresh, device flow (polling), client_credentials, RFC 8693 token exchange (with and
# without actor_token, plus a forged subject_token), dynamic registration, then closes the
# provider's stdin and checks that it exits. Prints the claims it sees; exit 0 = pass.
import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree clean
import browser  # noqa: E402

TE = "urn:ietf:params:oauth:grant-type:token-exchange"
AT_TYPE = "urn:ietf:params:oauth:token-type:access_token"
DOWNSTREAM = "http://127.0.0.1:9/downstream"
CONFIG = {
    "resource": "urn:bulkhead",
    "audience": "bulkhead",
    "resources": [{"resource": DOWNSTREAM, "audience": "downstream"}],
    "resource_scopes": ["read", "write"],
    "users": [{"id": "alice", "email": "alice@example.test", "name": "Alice"},
              {"id": "bob", "email": "bob@example.test", "name": "Bob"}],
    "clients": [
        {"client_id": "web", "client_secret": "web-secret", "redirect_uris": ["http://127.0.0.1:1/cb"],
         "grant_types": ["authorization_code", "refresh_token", TE]},
        {"client_id": "tv", "token_endpoint_auth_method": "none",
         "grant_types": ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"]},
        {"client_id": "agent-host", "client_secret": "agent-secret", "grant_types": ["client_credentials"]},
    ],
}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_parts(token):
    def dec(s):
        return json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
    h, p, _ = token.split(".")
    return dec(h), dec(p)


def http(url, form=None, auth=None, body=None):
    headers = {}
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}")


def check_at(token, jwks, issuer, aud, sub, client_id):
    header, claims = jwt_parts(token)
    check(header["alg"] in ("RS256", "ES256") and header.get("typ") == "at+jwt", f"AT header {header}")
    check(header["kid"] in {k["kid"] for k in jwks["keys"]}, "AT kid is in the JWKS")
    check(claims["iss"] == issuer and claims["aud"] == aud and claims["sub"] == sub
          and claims["client_id"] == client_id and claims["exp"] > time.time(),
          f"AT claims {json.dumps(claims, sort_keys=True)}")
    return claims


def main():
    modules = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OIDC_NODE_MODULES")
    if not modules:
        raise SystemExit("usage: smoke.py NODE_MODULES_DIR")
    cfg = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(CONFIG, cfg)
    cfg.close()
    proc = subprocess.Popen(["node", os.path.join(HERE, "provider.mjs"), "0", cfg.name, modules],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        issuer = ready["issuer"]
        check(issuer == f"http://127.0.0.1:{ready['port']}", f"ready line {ready}")
        run(issuer)
        proc.stdin.close()  # the provider must exit on its own when stdin closes
        check(proc.wait(timeout=5) == 0, "provider exited when stdin closed")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.unlink(cfg.name)
    print("SMOKE PASSED")


def run(issuer):
    _, disc = http(issuer + "/.well-known/openid-configuration")
    check(disc["issuer"] == issuer and disc["authorization_response_iss_parameter_supported"], "discovery")
    for k in ("authorization_endpoint", "token_endpoint", "jwks_uri", "registration_endpoint",
              "device_authorization_endpoint", "userinfo_endpoint", "introspection_endpoint",
              "revocation_endpoint", "end_session_endpoint"):
        print(f"     {k}: {disc[k]}")
    _, jwks = http(disc["jwks_uri"])
    web = ("web", "web-secret")

    # Authorization code + PKCE (S256), no resource param -> default resource urn:bulkhead.
    verifier = b64(secrets.token_bytes(32))
    state = secrets.token_hex(8)
    q = {"response_type": "code", "client_id": "web", "redirect_uri": "http://127.0.0.1:1/cb",
         "scope": "openid email profile offline_access read", "state": state, "nonce": "n-1",
         "code_challenge": b64(hashlib.sha256(verifier.encode()).digest()), "code_challenge_method": "S256"}
    redirect = browser.authorize(disc["authorization_endpoint"] + "?" + urllib.parse.urlencode(q), "alice")
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(redirect).query))
    check(redirect.startswith("http://127.0.0.1:1/cb?") and params.get("state") == state
          and params.get("iss") == issuer and "code" in params, "authorization redirect has code, state, iss")
    st, tok = http(disc["token_endpoint"], {"grant_type": "authorization_code", "code": params["code"],
                                            "redirect_uri": q["redirect_uri"], "code_verifier": verifier}, auth=web)
    check(st == 200 and {"access_token", "id_token", "refresh_token"} <= tok.keys(),
          f"code exchange -> {sorted(tok)} scope={tok.get('scope')!r}")
    at = check_at(tok["access_token"], jwks, issuer, "bulkhead", "alice", "web")
    check(at["scope"] == "read", "AT scope is the resource scopes requested")
    idh, idt = jwt_parts(tok["id_token"])
    check(idt["aud"] == "web" and idt["email"] == "alice@example.test" and idt["nonce"] == "n-1",
          f"ID token {idh['alg']} {json.dumps(idt, sort_keys=True)}")

    st, ref = http(disc["token_endpoint"], {"grant_type": "refresh_token",
                                            "refresh_token": tok["refresh_token"]}, auth=web)
    check(st == 200 and "refresh_token" in ref, "refresh grant")
    check_at(ref["access_token"], jwks, issuer, "bulkhead", "alice", "web")

    # Device authorization grant, public client, completed by bob with plain HTTP.
    st, dev = http(disc["device_authorization_endpoint"], {"client_id": "tv", "scope": "openid read"})
    check(st == 200, f"device authorization: {dev['user_code']} at {dev['verification_uri']}")
    poll = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": dev["device_code"],
            "client_id": "tv"}
    st, pending = http(disc["token_endpoint"], poll)
    check(st == 400 and pending["error"] == "authorization_pending", "poll before approval -> authorization_pending")
    browser.device(dev["verification_uri"], dev["user_code"], "bob")
    for _ in range(10):
        time.sleep(dev.get("interval", 5))
        st, dtok = http(disc["token_endpoint"], poll)
        if dtok.get("error") not in ("authorization_pending", "slow_down"):
            break
    check(st == 200 and "refresh_token" in dtok, "device flow tokens")
    check_at(dtok["access_token"], jwks, issuer, "bulkhead", "bob", "tv")

    # verification_uri_complete (code prefilled) works too.
    st, dev2 = http(disc["device_authorization_endpoint"], {"client_id": "tv", "scope": "read"})
    browser.device(dev2["verification_uri_complete"], dev2["user_code"], "alice")
    check(True, "device flow via verification_uri_complete")

    # client_credentials: the agent host's own (actor) token.
    st, cc = http(disc["token_endpoint"], {"grant_type": "client_credentials", "scope": "read"},
                  auth=("agent-host", "agent-secret"))
    check(st == 200, "client_credentials grant")
    check_at(cc["access_token"], jwks, issuer, "bulkhead", "agent-host", "agent-host")

    # RFC 8693 token exchange: alice's bulkhead token -> token for the downstream audience.
    ex = {"grant_type": TE, "subject_token": tok["access_token"], "subject_token_type": AT_TYPE,
          "audience": "downstream"}
    st, xt = http(disc["token_endpoint"], ex, auth=web)
    check(st == 200 and xt["issued_token_type"] == AT_TYPE, f"token exchange -> {xt.get('error', 'ok')}")
    check_at(xt["access_token"], jwks, issuer, "downstream", "alice", "web")
    ex2 = {k: v for k, v in ex.items() if k != "audience"}
    st, xt2 = http(disc["token_endpoint"], {**ex2, "actor_token": cc["access_token"], "actor_token_type": AT_TYPE,
                                            "resource": DOWNSTREAM}, auth=web)
    xc = check_at(xt2["access_token"], jwks, issuer, "downstream", "alice", "web") if st == 200 else {}
    check(xc.get("act") == {"sub": "agent-host"}, "token exchange with actor_token -> act claim")
    h, p, s = tok["access_token"].split(".")
    forged = h + "." + b64(json.dumps({**at, "sub": "mallory"}).encode()) + "." + s
    st, bad = http(disc["token_endpoint"], {**ex, "subject_token": forged}, auth=web)
    check(st == 400 and bad["error"] == "invalid_grant", f"forged subject_token rejected: {bad}")
    st, bad = http(disc["token_endpoint"], {**ex, "scope": "write"}, auth=web)
    check(st == 400 and bad["error"] == "invalid_scope", "token exchange cannot widen scope")

    # Open dynamic client registration, then a public-client PKCE flow with the new client.
    st, reg = http(disc["registration_endpoint"], body={
        "redirect_uris": ["http://127.0.0.1:2/cb"], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})
    check(st == 201 and reg["client_id"], f"dynamic registration -> {reg.get('client_id')}")
    verifier = b64(secrets.token_bytes(32))
    q = {"response_type": "code", "client_id": reg["client_id"], "redirect_uri": "http://127.0.0.1:2/cb",
         "scope": "read write", "code_challenge": b64(hashlib.sha256(verifier.encode()).digest()),
         "code_challenge_method": "S256", "resource": "urn:bulkhead"}
    redirect = browser.follow(disc["authorization_endpoint"] + "?" + urllib.parse.urlencode(q), "bob",
                              "http://127.0.0.1:2/cb")
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(redirect).query))["code"]
    st, tok2 = http(disc["token_endpoint"], {"grant_type": "authorization_code", "code": code,
                                             "client_id": reg["client_id"], "redirect_uri": q["redirect_uri"],
                                             "code_verifier": verifier})
    check(st == 200 and "id_token" not in tok2, "registered public client code exchange (no openid)")
    c2 = check_at(tok2["access_token"], jwks, issuer, "bulkhead", "bob", reg["client_id"])
    check(c2["scope"] == "read write", "AT scope read write")


if __name__ == "__main__":
    main()
