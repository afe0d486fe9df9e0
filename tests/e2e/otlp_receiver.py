"""An OTLP/HTTP trace receiver for tests: services export their spans to it (as they would to
an OpenTelemetry collector) and the test reads them back, in memory."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: int  # OTLP's: 2 server, 3 client, 5 consumer
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, object]


class OTLPReceiver:
    """`with OTLPReceiver() as receiver:` serves POST /v1/traces on a free loopback port."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.endpoint = f"http://127.0.0.1:{self._server.server_port}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(_received(resource["service.name"], span))
        with self._lock:
            self.spans.extend(found)

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def __enter__(self) -> OTLPReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


def _received(service: str, span: object) -> ReceivedSpan:
    attributes: dict[str, object] = {}
    for attribute in span.attributes:  # type: ignore[attr-defined]
        value = attribute.value
        attributes[attribute.key] = getattr(value, value.WhichOneof("value") or "string_value")
    return ReceivedSpan(
        service=service,
        name=span.name,  # type: ignore[attr-defined]
        kind=span.kind,  # type: ignore[attr-defined]
        trace_id=span.trace_id.hex(),  # type: ignore[attr-defined]
        span_id=span.span_id.hex(),  # type: ignore[attr-defined]
        parent_id=span.parent_span_id.hex(),  # type: ignore[attr-defined]
        attributes=attributes,
    )


def _handler(receiver: OTLPReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            receiver.add(ExportTraceServiceRequest.FromString(body))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    return Handler
