"""An OTLP/HTTP endpoint that accepts every export and keeps nothing: where the proxy's spans
go when the benchmark measures it with tracing on. Prints its URL, then serves until killed."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
