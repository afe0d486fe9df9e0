"""A webhook receiver as a process of its own (a host of its own in test_several_hosts.py): it
answers every POST with 200 and prints each delivery as one JSON line, its headers and its body,
after a first "listening on <url>" line."""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        headers = {k.lower(): v for k, v in self.headers.items()}
        print(json.dumps({"headers": headers, "body": body.decode()}), flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_: object) -> None:  # quiet: stdout carries the deliveries
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True, help="the address to listen on")
    host = parser.parse_args().host
    server = ThreadingHTTPServer((host, 0), _Handler)
    print(f"listening on http://{host}:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
