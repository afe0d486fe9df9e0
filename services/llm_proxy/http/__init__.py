"""The client side of the proxy's HTTP: what a completion request holds (`payload`), the
stream relayed back to the client (`streaming`), and the spans of each request (`tracing`).
The server itself is `taskyard.http1`; errors become responses in `services.llm_proxy.errors`."""
