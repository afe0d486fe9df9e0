"""The proxy's rules as plain functions: routes, the create rule on the tool worker's own
bodies, ownership and the hand-off names, the callers' settings."""

from __future__ import annotations

import json
from typing import Any

import docker
import pytest
from pydantic import ValidationError

from services.engine_proxy.callers import TOKEN_HEADER
from services.engine_proxy.create import Limits, check_create
from services.engine_proxy.errors import Refused
from services.engine_proxy.fork_servers import MUST_DENY
from services.engine_proxy.ownership import CALLER_LABEL, HANDOFF_PREFIX, holding, taken_name
from services.engine_proxy.routes import route
from services.engine_proxy.settings import EngineProxySettings
from taskyard.sandbox.docker import provider as docker_sandbox
from taskyard.sandbox.docker.spec import FORK_SERVER_NEEDS, ContainerSpec
from taskyard.sandbox.kernel.seccomp import DENIED

ID = "0123456789ab" + "c" * 52
TOKEN = "t" * 32


def _limits(**changes: Any) -> Limits:
    settings = EngineProxySettings(engine_proxy_callers=f"w={TOKEN}", **changes)
    return Limits.from_settings(settings)


def _body_of(spec: ContainerSpec) -> dict[str, Any]:
    """The create body the tool worker's `ContainerSpec` sends, caught on its way out."""
    api = docker.APIClient(version="1.41")
    sent: dict[str, Any] = {}

    def post_json(url: str, data: dict[str, Any], **_: Any) -> None:
        sent.update(data)
        raise StopIteration

    api._post_json = post_json  # type: ignore[method-assign]
    with pytest.raises(StopIteration):
        spec.create(api, {"taskyard.session": "t:s"})
    return sent


def test_the_hand_off_prefix_and_the_token_header_are_the_sandboxs() -> None:
    assert HANDOFF_PREFIX == docker_sandbox.HANDOFF_PREFIX
    assert TOKEN_HEADER == docker_sandbox.ENGINE_TOKEN_HEADER


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_the_tool_workers_create_passes_labelled_and_otherwise_unchanged(runtime: str) -> None:
    body = _body_of(ContainerSpec(image="taskyard/sandbox:latest", runtime=runtime))
    checked = check_create(
        json.dumps(body).encode(), "w", _limits(engine_proxy_runtimes="runc,runsc")
    )
    forwarded = json.loads(checked.body)
    assert forwarded.pop("Labels") == {"taskyard.session": "t:s", CALLER_LABEL: "w"}
    body.pop("Labels")
    assert forwarded == body


def test_a_fork_servers_create_passes_with_its_profile_and_session_limits() -> None:
    spec = ContainerSpec(image="taskyard/sandbox:latest", sessions=64)
    body = _body_of(spec)
    checked = check_create(json.dumps(body).encode(), "w", _limits())
    forwarded = json.loads(checked.body)["HostConfig"]
    assert forwarded["SecurityOpt"] == body["HostConfig"]["SecurityOpt"]
    with pytest.raises(Refused, match=r"HostConfig\.Memory"):  # more sessions than it may hold
        check_create(json.dumps(body).encode(), "w", _limits(engine_proxy_max_sessions=8))


def test_the_profile_the_proxy_demands_is_the_kernel_filters_but_the_fork_servers_needs() -> None:
    assert set(DENIED) - FORK_SERVER_NEEDS == MUST_DENY


def _with_profile(profile: object) -> bytes:
    body = _body_of(ContainerSpec(image="taskyard/sandbox:latest", sessions=64))
    text = profile if isinstance(profile, str) else json.dumps(profile)
    body["HostConfig"]["SecurityOpt"] = ["no-new-privileges", f"seccomp={text}"]
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    "profile",
    [
        "unconfined",
        {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []},
        {"defaultAction": "SCMP_ACT_ALLOW",
         "syscalls": [{"names": sorted(MUST_DENY - {"ptrace"}), "action": "SCMP_ACT_ERRNO"}]},
        {"defaultAction": "SCMP_ACT_ALLOW",
         "syscalls": [{"names": sorted(MUST_DENY), "action": "SCMP_ACT_ERRNO"},
                      {"names": ["ptrace"], "action": "SCMP_ACT_ALLOW"}]},
        {"defaultAction": "SCMP_ACT_ALLOW",
         "syscalls": [{"names": sorted(MUST_DENY), "action": "SCMP_ACT_ERRNO",
                       "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]},
        {"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/x",
         "syscalls": [{"names": sorted(MUST_DENY), "action": "SCMP_ACT_ERRNO"}]},
    ],
    ids=["unconfined", "denies nothing", "allows ptrace", "a rule allowing", "argument filter",
         "other keys"],
)  # fmt: skip
def test_a_seccomp_profile_that_allows_more_is_refused(profile: object) -> None:
    with pytest.raises(Refused, match="seccomp"):
        check_create(_with_profile(profile), "w", _limits())


def test_every_problem_of_a_create_is_said_at_once() -> None:
    body = _body_of(ContainerSpec(image="taskyard/sandbox:latest", memory="2g"))
    body["HostConfig"] |= {"Privileged": True, "NetworkMode": "host"}
    with pytest.raises(Refused) as caught:
        check_create(json.dumps(body).encode(), "w", _limits())
    said = caught.value.reason
    for part in ("HostConfig.Privileged", "HostConfig.NetworkMode", "HostConfig.Memory"):
        assert part in said


@pytest.mark.parametrize(
    ("name", "owner", "handed_off"),
    [
        ("/happy_turing", "maker", False),
        (f"/{HANDOFF_PREFIX}{ID[:12]}", "maker", True),
        (f"/{taken_name(ID, 'taker-1.b')}", "taker-1.b", False),
        (f"/{HANDOFF_PREFIX}{'f' * 12}", "maker", False),  # another container's hand-off name
        (f"/taskyard-taken-taker-{'f' * 12}", "maker", False),  # another container's too
    ],
)
def test_whose_a_container_is(name: str, owner: str, handed_off: bool) -> None:
    held = holding(ID, name, {CALLER_LABEL: "maker"})
    assert (held.owner, held.handed_off) == (owner, handed_off)
    assert held.handoff_name == f"{HANDOFF_PREFIX}{ID[:12]}"


def test_a_container_no_worker_made_is_nobodys() -> None:
    assert holding(ID, "/x", None).owner == holding(ID, "/x", {"other": "1"}).owner == ""


@pytest.mark.parametrize(
    ("method", "path", "name", "version"),
    [
        ("GET", "/_ping", "ping", ""),
        ("POST", "/v1.41/containers/create", "create", "/v1.41"),
        ("POST", f"/v1.44/containers/{ID}/attach", "attach", "/v1.44"),
        ("DELETE", "/containers/happy_turing", "remove", ""),
        ("GET", f"/v1.41/exec/{ID}/json", "exec.inspect", "/v1.41"),
    ],
)
def test_routes_a_sandbox_needs(method: str, path: str, name: str, version: str) -> None:
    found = route(method, path)
    assert (found.name, found.version) == (name, version)


@pytest.mark.parametrize(
    ("method", "path", "said"),
    [
        ("POST", "/v1.24/containers/create", "older than the engine proxy accepts"),
        ("POST", f"/containers/{ID}/update", r"may not be changed \(update\)"),
        ("GET", "/containers/../images/json", "not something a sandbox needs"),
        ("GET", "/containers/%2e%2e/json", "not something a sandbox needs"),
        ("POST", "/containers/a/b/start", "not something a sandbox needs"),
        ("PUT", "/containers/create", "not something a sandbox needs"),
    ],
)
def test_other_routes_are_refused(method: str, path: str, said: str) -> None:
    with pytest.raises(Refused, match=said):
        route(method, path)


@pytest.mark.parametrize(
    "callers",
    [f"w={'short'}", f"w={TOKEN},w={TOKEN}x", f"w={TOKEN},v={TOKEN}", f"a b={TOKEN}", TOKEN],
)
def test_callers_are_named_once_with_long_tokens_of_their_own(callers: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EngineProxySettings(engine_proxy_callers=callers)
    assert TOKEN not in str(caught.value)  # a token is never repeated


def test_callers_by_token() -> None:
    settings = EngineProxySettings(engine_proxy_callers=f"w1={TOKEN}, w2={TOKEN}2")
    assert settings.callers() == {TOKEN: "w1", f"{TOKEN}2": "w2"}
