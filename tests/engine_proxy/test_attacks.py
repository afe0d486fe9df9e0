"""A compromised tool worker attacks the engine through its own `DOCKER_HOST`, with the Docker
SDK: every escalation is refused with a clear 403 naming what was refused, and each create
differs by that one thing from the tool worker's own create, which passes."""

from __future__ import annotations

import io
import socket
from typing import Any

import docker
import pytest
from docker.errors import APIError
from docker.types import Mount

from devstack.engine_proxy import EngineAccess
from services.engine_proxy import CALLER_LABEL
from tests.engine_proxy.conftest import MAX_MEMORY, MAX_PIDS, Connect, create, sandbox_kwargs

REFUSED = "refused by the engine proxy"


def _refused(call: Any, *args: Any, **kwargs: Any) -> str:
    """Run the call; assert the proxy refused it with a 403, and return the reason."""
    with pytest.raises(APIError) as caught:
        call(*args, **kwargs)
    assert caught.value.status_code == 403, caught.value
    explanation = str(caught.value.explanation)
    assert explanation.startswith(REFUSED), explanation
    return explanation


def test_the_tool_workers_own_create_passes_and_is_labelled_as_the_caller(
    as_worker: Connect, engine: docker.DockerClient, sandbox_image: str, cleanup: list[str]
) -> None:
    worker = as_worker("tools-a")
    cleanup.append(container := create(worker, sandbox_kwargs(sandbox_image)))
    labels = engine.api.inspect_container(container)["Config"]["Labels"]
    assert labels[CALLER_LABEL] == "tools-a"
    image_id = engine.images.get(sandbox_image).id
    cleanup.append(create(worker, sandbox_kwargs(image_id)))  # the same image, by id


CREATE_ATTACKS: dict[str, tuple[dict[str, Any], str]] = {
    "privileged": ({"privileged": True}, "HostConfig.Privileged is not allowed"),
    "bind of /": ({"binds": ["/:/host"]}, "HostConfig.Binds is not allowed"),
    "bind mount of /": (
        {"mounts": [Mount("/host", "/", type="bind")]}, "HostConfig.Mounts is not allowed"
    ),
    "volume": ({"volumes": ["/data"]}, "Volumes is not allowed"),
    "volumes from": ({"volumes_from": ["other"]}, "HostConfig.VolumesFrom is not allowed"),
    "host network": ({"network_mode": "host"}, "HostConfig.NetworkMode must be 'none'"),
    "default network": ({"network_mode": "bridge"}, "HostConfig.NetworkMode must be 'none'"),
    "host pid": ({"pid_mode": "host"}, "HostConfig.PidMode is not allowed"),
    "host ipc": ({"ipc_mode": "host"}, "HostConfig.IpcMode must be private"),
    "host uts": ({"uts_mode": "host"}, "HostConfig.UTSMode is not allowed"),
    "host userns": ({"userns_mode": "host"}, "HostConfig.UsernsMode is not allowed"),
    "cgroup namespace": ({"cgroupns": "host"}, "HostConfig.CgroupnsMode is not allowed"),
    "cap_add": ({"cap_add": ["SYS_ADMIN"]}, "HostConfig.CapAdd is not allowed"),
    "capabilities kept": ({"cap_drop": ["NET_RAW"]}, "HostConfig.CapDrop must hold ALL"),
    "devices": ({"devices": ["/dev/sda:/dev/sda:rwm"]}, "HostConfig.Devices is not allowed"),
    "device rules": ({"device_cgroup_rules": ["a *:* rwm"]}, "DeviceCgroupRules is not allowed"),
    "seccomp unconfined": (
        {"security_opt": ["no-new-privileges", "seccomp=unconfined"]}, "HostConfig.SecurityOpt"
    ),
    "apparmor unconfined": (
        {"security_opt": ["no-new-privileges", "apparmor=unconfined"]}, "HostConfig.SecurityOpt"
    ),
    "systempaths unconfined": (
        {"security_opt": ["no-new-privileges", "systempaths=unconfined"]},
        "HostConfig.SecurityOpt",
    ),
    "new privileges": ({"security_opt": []}, "HostConfig.SecurityOpt"),
    "another runtime": ({"runtime": "runsc"}, "HostConfig.Runtime must be one of runc"),
    "no memory limit": ({"mem_limit": None, "memswap_limit": None}, "HostConfig.Memory must be"),
    "memory above the max": (
        {"mem_limit": MAX_MEMORY * 2, "memswap_limit": MAX_MEMORY * 2}, "HostConfig.Memory must"
    ),
    "unlimited swap": ({"memswap_limit": -1}, "HostConfig.MemorySwap must be"),
    "no pids limit": ({"pids_limit": None}, "HostConfig.PidsLimit must be set"),
    "pids above the max": ({"pids_limit": MAX_PIDS + 1}, "HostConfig.PidsLimit must be"),
    "no cpu limit": ({"nano_cpus": None}, "HostConfig.NanoCpus must be set"),
    "writable root": ({"read_only": False}, "HostConfig.ReadonlyRootfs must be true"),
    "root user": ({"user": "0:0"}, "User must be '65534:65534'"),
    "image default user": ({"user": None}, "User must be '65534:65534'"),
    "tmpfs over /etc": (
        {"tmpfs": {"/etc": "rw,nosuid,nodev,size=1m"}}, "HostConfig.Tmpfs may mount only"
    ),
    "huge tmpfs": ({"tmpfs": {"/work": "rw,nosuid,nodev,size=64g"}}, "needs a size of at most"),
    "suid tmpfs": ({"tmpfs": {"/work": "rw,size=1m"}}, "options must be nosuid,nodev"),
    "cgroup parent": ({"cgroup_parent": "/"}, "HostConfig.CgroupParent is not allowed"),
    "oom killer off": ({"oom_kill_disable": True}, "HostConfig.OomKillDisable is not allowed"),
    "host sysctl": ({"sysctls": {"net.ipv4.ip_forward": "1"}}, "HostConfig.Sysctls may set only"),
    "log file on the host": ({"log_config": {"Type": "json-file"}}, "HostConfig.LogConfig"),
    "group add": ({"group_add": ["0"]}, "HostConfig.GroupAdd is not allowed"),
    "published ports": ({"publish_all_ports": True}, "HostConfig.PublishAllPorts is not allowed"),
    "restart forever": ({"restart_policy": {"Name": "always"}}, "RestartPolicy is not allowed"),
    "another worker's label": (
        {"labels": {CALLER_LABEL: "tools-b"}}, "the label taskyard.caller names another worker"
    ),
    "a name": ({"name": "taskyard-handoff-000000000000"}, "not named at its creation"),
}  # fmt: skip


@pytest.mark.parametrize("attack", list(CREATE_ATTACKS))
def test_a_create_past_what_a_sandbox_needs_is_refused(
    attack: str, as_worker: Connect, sandbox_image: str, cleanup: list[str]
) -> None:
    changes, said = CREATE_ATTACKS[attack]
    kwargs = sandbox_kwargs(sandbox_image, **changes)
    with pytest.raises(APIError) as caught:
        cleanup.append(create(as_worker("tools-a"), kwargs))
    assert caught.value.status_code == 403
    assert said in str(caught.value.explanation)


def test_another_image_is_refused_by_name_and_by_id(
    as_worker: Connect, engine: docker.DockerClient, other_image: str, sandbox_image: str
) -> None:
    worker = as_worker("tools-a")
    for image in (other_image, engine.images.get(other_image).id, "no/such:image"):
        said = _refused(create, worker, sandbox_kwargs(image))
        assert "is not the sandbox image" in said


RAW_BODIES = {
    # What the engine reads ignoring case (Go's JSON), or keeps the last of.
    "privileged in lower case": b'"privileged": true',
    "network mode twice, cased apart": b'"NetworkMode": "none", "networkmode": "host"',
    "a folded key": '"\u017fecurityOpt": ["seccomp=unconfined"]'.encode(),
    "masks cleared": b'"MaskedPaths": []',
}


@pytest.mark.parametrize("trick", list(RAW_BODIES))
def test_a_body_the_engine_could_read_otherwise_is_refused(
    trick: str, as_worker: Connect, sandbox_image: str
) -> None:
    worker = as_worker("tools-a")
    host = worker.api.create_host_config(**sandbox_kwargs(sandbox_image)["host_config"])
    body = worker.api.create_container_config(sandbox_image, None, user="65534:65534")
    text = docker.utils.json_stream.json.dumps({**body, "HostConfig": host})
    tricked = text[:-2] + ", " + RAW_BODIES[trick].decode() + "}}"
    answer = worker.api.post(
        worker.api._url("/containers/create"),
        data=tricked,
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code in (400, 403), answer.text
    assert answer.json()["message"].startswith(REFUSED)


def test_nothing_but_containers_passes(as_worker: Connect, sandbox_image: str) -> None:
    worker = as_worker("tools-a")
    refusals = [
        _refused(worker.images.pull, "alpine", tag="latest"),
        _refused(worker.api.remove_image, sandbox_image),
        _refused(worker.api.tag, sandbox_image, "taskyard/sandbox", "mine"),
        _refused(worker.api.inspect_image, sandbox_image),
        _refused(worker.images.list),
        _refused(lambda: list(worker.api.build(fileobj=io.BytesIO(b"FROM scratch")))),
        _refused(worker.volumes.create, "loot"),
        _refused(worker.networks.create, "bridge-out"),
        _refused(lambda: worker.swarm.init()),
        _refused(worker.plugins.list),
        _refused(worker.containers.prune),
        _refused(worker.images.prune),
        _refused(worker.api.df),
        _refused(lambda: list(worker.api.get_image(sandbox_image))),
        _refused(lambda: list(worker.api.load_image(b"not a tar"))),
    ]
    assert all("is not something a sandbox needs" in said for said in refusals), refusals


def test_a_workers_own_container_cannot_be_updated_or_exec_as_root(
    as_worker: Connect, sandbox_image: str, cleanup: list[str]
) -> None:
    worker = as_worker("tools-a")
    cleanup.append(container := create(worker, sandbox_kwargs(sandbox_image)))
    worker.api.start(container)
    said = _refused(worker.api.update_container, container, mem_limit="4g", memswap_limit="4g")
    assert "may not be changed (update)" in said
    assert "privileged" in _refused(worker.api.exec_create, container, "id", privileged=True)
    assert "sandbox's user" in _refused(worker.api.exec_create, container, "id", user="root")
    assert "sandbox's user" in _refused(worker.api.exec_create, container, "id", user="0")
    # As the sandbox's user, an exec runs.
    exec_id = worker.api.exec_create(container, ["id", "-u"], user="65534:65534")["Id"]
    assert worker.api.exec_start(exec_id).strip() == b"65534"
    assert worker.api.exec_inspect(exec_id)["ExitCode"] == 0


def test_a_worker_without_its_token_is_refused(access: EngineAccess, sandbox_image: str) -> None:
    anonymous = docker.DockerClient(base_url=access.address)  # the version: open to all
    wrong = docker.DockerClient(base_url=access.address)
    wrong.api.headers["X-Taskyard-Engine-Token"] = "f" * 64
    for client, said in ((anonymous, "no X-Taskyard-Engine-Token"), (wrong, "not a tool worker")):
        with pytest.raises(APIError) as caught:
            create(client, sandbox_kwargs(sandbox_image))
        assert caught.value.status_code == 401 and said in str(caught.value.explanation)
        for call in (client.containers.list, client.info):
            with pytest.raises(APIError) as caught:
                call()
            assert caught.value.status_code == 401


def test_a_path_or_request_the_engine_could_route_elsewhere_is_refused(
    as_worker: Connect,
) -> None:
    worker = as_worker("tools-a")
    session, root = worker.api, worker.api.base_url
    for path in ("/containers/../images/json", "/containers/%2e%2e/images/json", "/events",
                 "/v1.23/containers/create", "/containers//json", "/images/json?x=/containers",
                 "/containers/json/../../images/json"):  # fmt: skip
        answer = session.get(f"{root}{path}")
        assert answer.status_code in (400, 403, 404), (path, answer.status_code)
        if answer.status_code != 404:
            assert answer.json()["message"].startswith(REFUSED), path

    def chunks() -> Any:
        yield b"{}"

    chunked = session.post(f"{root}/containers/create", data=chunks())
    assert chunked.status_code == 411


SMUGGLED = {
    "two lengths": b"Content-Length: 2\r\nContent-Length: 60",
    "a length and chunks": b"Content-Length: 2\r\nTransfer-Encoding: chunked",
    "a folded header": b"X-A: 1\r\n Transfer-Encoding: chunked",
    "a bare LF": b"X-A: 1\nTransfer-Encoding: chunked",
}


@pytest.mark.parametrize("trick", list(SMUGGLED))
def test_a_request_smuggled_past_the_proxy_is_refused(
    trick: str, access: EngineAccess, sandbox_image: str
) -> None:
    # A first request the proxy allows, whose head hides a second one (an image pull) in its
    # body for an engine that would frame it another way.
    token = access.tokens["tools-a"].encode()
    hidden = b"POST /images/create?fromImage=alpine HTTP/1.1\r\nHost: d\r\n\r\n"
    request = (
        b"POST /containers/create HTTP/1.1\r\nHost: docker\r\n"
        b"X-Taskyard-Engine-Token: " + token + b"\r\n" + SMUGGLED[trick] + b"\r\n\r\n"
        b"{}" + hidden
    )
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(access.address.removeprefix("unix://"))
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status in (400, 411), answer
    assert answer.count(b"HTTP/1.1") == 1, answer  # one answer, and the connection closed
