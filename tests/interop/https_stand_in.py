"""An HTTPS stand-in for an outside service (a team's webhook API) in the isolation tests.

Usage: https_stand_in.py HOST PORT PORT_FILE CERT KEY. Answers every GET and POST with 200 and
`{"delivered": true, "path": <path>}`, and writes the bound port to PORT_FILE once listening
(PORT 0 picks a free one).
"""

import http.server
import json
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 20))
        data = json.dumps({"delivered": True, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = reply  # noqa: N815 - the stdlib's names
    do_POST = reply  # noqa: N815

    def log_message(self, *args):
        pass


def main(host: str, port: str, port_file: str, cert: str, key: str) -> None:
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_port))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:6])
