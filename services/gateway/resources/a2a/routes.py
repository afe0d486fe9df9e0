"""A2A: Agent Cards (public, for discovery) and each agent's JSON-RPC endpoint (the tenant's
API key, as every /v1 route). The SDK's dispatcher speaks JSON-RPC (A2A 1.0's methods and 0.3's,
`message/send` and the rest) and server-sent events; `handler` answers from the store. Not in
the OpenAPI document: the Agent Card describes these."""

from __future__ import annotations

from typing import Annotated

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response, status
from fastapi.responses import JSONResponse

from services.gateway.deps import CeleryDep, HubDep, SettingsDep, StoreDep, TenantDep
from services.gateway.json_route import JSONRoute
from services.gateway.resources.a2a.cards import agent_card
from services.gateway.resources.a2a.handler import Caller, TaskyardHandler
from services.gateway.resources.files.deps import SessionFilesDep
from services.gateway.resources.tasks.models import TaskAccepted, TaskCreate
from services.gateway.resources.tasks.routes import create_task
from taskyard.agentkit.agents import AGENTS

router = APIRouter(tags=["a2a"], route_class=JSONRoute, include_in_schema=False)


async def registered(agent: Annotated[str, Path(min_length=1, max_length=128)]) -> str:
    """A registered agent's name from the path; 404 for any other."""
    if agent not in AGENTS:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such agent")
    return agent


AgentDep = Annotated[str, Depends(registered)]


async def get_handler(
    request: Request,
    tenant: TenantDep,
    store: StoreDep,
    hub: HubDep,
    celery: CeleryDep,
    settings: SettingsDep,
    files: SessionFilesDep,
) -> TaskyardHandler:
    """This request's A2A operations (for the default agent; the route names another)."""

    async def submit(body: TaskCreate, idempotency_key: str | None) -> TaskAccepted:
        # A message is a submission like `POST /v1/tasks`: the same checks, the same write.
        return await create_task(body, tenant, store, celery, settings, files, idempotency_key)

    agent = request.path_params.get("agent")
    caller = Caller(tenant, agent, str(request.base_url), submit)
    return TaskyardHandler(caller, store, hub, celery, settings)


HandlerDep = Annotated[TaskyardHandler, Depends(get_handler)]


@router.get("/.well-known/agent-card.json")
async def default_card(request: Request, settings: SettingsDep) -> JSONResponse:
    """The default agent's card."""
    return JSONResponse(agent_card_to_dict(agent_card(str(request.base_url), None, settings)))


@router.get("/a2a/{agent}/.well-known/agent-card.json")
async def registered_card(agent: AgentDep, request: Request, settings: SettingsDep) -> JSONResponse:
    """A registered agent's card."""
    return JSONResponse(agent_card_to_dict(agent_card(str(request.base_url), agent, settings)))


@router.post("/v1/a2a")
async def default_agent(request: Request, handler: HandlerDep) -> Response:
    """JSON-RPC for the default agent."""
    return await _dispatch(request, handler)


@router.post("/v1/a2a/{agent}")
async def registered_agent(agent: AgentDep, request: Request, handler: HandlerDep) -> Response:
    """JSON-RPC for a registered agent."""
    return await _dispatch(request, handler)


async def _dispatch(request: Request, handler: TaskyardHandler) -> Response:
    # Made per request (a few small objects): the handler holds this caller's tenant.
    dispatcher = JsonRpcDispatcher(handler, enable_v0_3_compat=True)
    return await dispatcher.handle_requests(request)
