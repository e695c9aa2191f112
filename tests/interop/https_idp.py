"""A minimal OIDC provider over HTTPS for the JWKS tests.

Usage: https_idp.py PORT_FILE CERT KEY JWKS_FILE. Serves `/.well-known/openid-configuration`
(issuer `https://localhost:<port>`) and `/jwks` (the file's content) on 127.0.0.1 with the given
certificate, and writes the chosen port to PORT_FILE once listening.
"""

import http.server
import json
import ssl
import sys


def main(port_file: str, cert: str, key: str, jwks_path: str) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            base = f"https://localhost:{self.server.server_port}"
            if self.path == "/.well-known/openid-configuration":
                body = json.dumps({"issuer": base, "jwks_uri": base + "/jwks"})
            elif self.path == "/jwks":
                with open(jwks_path) as f:
                    body = f.read()
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_port))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:5])
