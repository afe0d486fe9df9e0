"""The gateway's resources, each a package of one shape: `routes.py` serves it (a FastAPI
router; for MCP, an ASGI endpoint), `models.py` holds its API models, one per direction, and
what only it uses sits beside them (its dependencies, a client, a protocol's parts). What every
resource uses (the app, dependencies, admission, errors, the event hub) is the gateway's own."""
