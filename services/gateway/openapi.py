"""The gateway's OpenAPI document: FastAPI's, made true where FastAPI cannot know better."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.gateway.admission import AUTH_PREFIX
from taskyard.agentkit.agents import AGENTS
from taskyard.agentkit.agents.as_tool import offered_tool_names

__all__ = ["openapi_document"]

_AUTO_422 = "HTTPValidationError"  # FastAPI's own 422 model, given to every route with parameters
_BEARER = "HTTPBearer"


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The document, made once and kept on the app."""
    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)
        _bearer_auth(schema)
        operations = [op for path in schema["paths"].values() for op in path.values()]
        for operation in operations:
            _drop_undeclared_422(operation)
            for parameter in operation.get("parameters", []):
                _not_null(parameter)
        del schema["components"]["schemas"][_AUTO_422]
        del schema["components"]["schemas"]["ValidationError"]
        _registered_names(schema["components"]["schemas"]["AgentSpec"]["properties"])
        app.openapi_schema = schema  # as FastAPI.openapi kept it
    return app.openapi_schema


def _bearer_auth(schema: dict[str, Any]) -> None:
    # The `Admission` asks every route under AUTH_PREFIX for a key, before FastAPI sees the
    # request: documented here, not by a security dependency FastAPI would run per request.
    schema["components"]["securitySchemes"] = {_BEARER: {"type": "http", "scheme": "bearer"}}
    for path, operations in schema["paths"].items():
        if path.startswith(AUTH_PREFIX):
            for operation in operations.values():
                operation["security"] = [{_BEARER: []}]


def _drop_undeclared_422(operation: dict[str, Any]) -> None:
    # Only the routes that declare a 422 (`errors.responses`) can answer one.
    if _AUTO_422 in str(operation["responses"].get("422")):
        del operation["responses"]["422"]


def _not_null(parameter: dict[str, Any]) -> None:
    # An optional header is absent or a string; FastAPI documents `str | None` as maybe null.
    schema = parameter["schema"]
    branches = [b for b in schema.pop("anyOf", []) if b != {"type": "null"}]
    if branches:
        (branch,) = branches
        parameter["schema"] = {**branch, **schema}


def _registered_names(spec: dict[str, Any]) -> None:
    # This deployment's tools and agents (plugins included): a request the schema calls valid
    # is one the gateway takes.
    spec["tools"]["items"]["enum"] = offered_tool_names()
    name, null = spec["agent"]["anyOf"]
    agents = sorted(AGENTS)
    spec["agent"]["anyOf"] = [{**name, "enum": agents}, null] if agents else [null]
