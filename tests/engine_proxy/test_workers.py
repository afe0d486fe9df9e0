"""Tool workers through the engine proxy: a sandbox made as the tool worker makes one runs; a
worker reaches its own containers alone; a hand-off moves a container to the worker that
takes it over, by the rule of `services.engine_proxy.ownership`."""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Callable
from typing import Any

import docker
import pytest
from docker.errors import APIError

from services.engine_proxy import CALLER_LABEL
from taskyard.sandbox.docker.provider import HANDOFF_PREFIX, OWNER_LABEL, DockerSandboxProvider
from tests.engine_proxy.conftest import Connect, create, sandbox_kwargs

TIMEOUT = 20.0
MakeProvider = Callable[..., DockerSandboxProvider]


def _containers_of(engine: docker.DockerClient, provider: DockerSandboxProvider) -> list[str]:
    listed = engine.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={provider.owner}"})
    return [c["Id"] for c in listed]


def _not_this_workers(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    with pytest.raises(APIError) as caught:
        call(*args, **kwargs)
    assert caught.value.status_code == 403, caught.value
    assert "is not this worker's" in str(caught.value.explanation), caught.value.explanation


def test_a_sandbox_made_as_the_tool_worker_makes_one_runs_through_the_proxy(
    provider_as: MakeProvider, engine: docker.DockerClient
) -> None:
    provider = provider_as("tools-a")
    provider.check()  # the runtime through `info`, and a sandbox started and ended
    sandbox = provider.get("t:s")
    assert sandbox.run("x = 41; x + 1", TIMEOUT).result == "42"
    sandbox.write_file("notes.txt", b"kept")
    assert sandbox.read_file("notes.txt", 100) == b"kept"
    (container,) = _containers_of(engine, provider)
    assert engine.api.inspect_container(container)["Config"]["Labels"][CALLER_LABEL] == "tools-a"
    provider.close_all()
    assert _containers_of(engine, provider) == []


def test_a_worker_acts_on_its_own_container_through_the_proxy(
    as_worker: Connect, sandbox_image: str, cleanup: list[str]
) -> None:
    client = as_worker("tools-a")
    worker = client.api
    cleanup.append(container := create(client, sandbox_kwargs(sandbox_image)))
    worker.start(container)
    files = io.BytesIO()
    with tarfile.open(fileobj=files, mode="w") as tar:
        tar.addfile(tarfile.TarInfo("empty"), io.BytesIO())
    # The engine's own refusal, passed on whole, though it answered before the body's end.
    with pytest.raises(APIError, match="rootfs is marked read-only"):
        worker.put_archive(container, "/tmp", files.getvalue())
    size = 300_000  # past one read: the stream is copied in pieces
    exec_id = worker.exec_create(container, ["head", "-c", str(size), "/dev/zero"])["Id"]
    assert worker.exec_start(exec_id) == b"\0" * size
    stream, _ = worker.get_archive(container, "/usr/lib/os-release")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.extractfile("os-release")
        assert member is not None and b"Debian" in member.read()
    assert worker.inspect_container(container[:12])["Id"] == container  # a prefix resolves
    worker.kill(container)
    assert worker.wait(container)["StatusCode"] != 0
    worker.remove_container(container)
    with pytest.raises(docker.errors.NotFound):  # the engine's own 404, as the SDK expects
        worker.inspect_container(container)


def test_another_workers_containers_are_out_of_reach(
    provider_as: MakeProvider, as_worker: Connect, engine: docker.DockerClient
) -> None:
    owner = provider_as("tools-a")
    owner.get("t:s").run("x = 1", TIMEOUT)
    (container,) = _containers_of(engine, owner)
    other = as_worker("tools-b").api
    for call, args in [
        (other.inspect_container, ()), (other.start, ()), (other.stop, ()), (other.kill, ()),
        (other.wait, ()), (other.logs, ()), (other.attach_socket, ()), (other.resize, (1, 1)),
        (other.exec_create, (["id"],)), (other.remove_container, ()),
        (other.rename, (f"{HANDOFF_PREFIX}{container[:12]}",)),
        (other.get_archive, ("/work",)), (other.put_archive, ("/work", b"")),
    ]:  # fmt: skip
        _not_this_workers(call, container, *args)
    _not_this_workers(other.inspect_container, container[:12])  # by a prefix too
    assert container not in [c["Id"] for c in other.containers(all=True)]
    assert container in [c["Id"] for c in as_worker("tools-a").api.containers(all=True)]
    assert owner.get("t:s").run("x", TIMEOUT).result == "1"  # untouched


def test_a_container_made_on_the_engine_directly_is_no_workers(
    as_worker: Connect, engine: docker.DockerClient, sandbox_image: str, cleanup: list[str]
) -> None:
    cleanup.append(container := create(engine, sandbox_kwargs(sandbox_image)))
    for name in ("tools-a", "tools-b"):
        worker = as_worker(name).api
        _not_this_workers(worker.inspect_container, container)
        _not_this_workers(worker.remove_container, container, force=True)
        assert container not in [c["Id"] for c in worker.containers(all=True)]


def test_a_restarted_worker_removes_only_its_own_leftovers(
    provider_as: MakeProvider, engine: docker.DockerClient
) -> None:
    # Both under the same worker label and node name: only the proxy tells them apart.
    first = provider_as("tools-a", node="tools@same")
    first.get("t:s").run("1", TIMEOUT)
    assert provider_as("tools-b", node="tools@same").remove_orphans() == 0
    assert len(_containers_of(engine, first)) == 1
    assert provider_as("tools-a", node="tools@same").remove_orphans() == 1


def test_a_handoff_moves_the_container_to_its_taker(
    provider_as: MakeProvider, as_worker: Connect, engine: docker.DockerClient
) -> None:
    maker = provider_as("tools-a", node="tools@a")
    maker.get("t:s").run("x = 41", TIMEOUT)
    (container,) = _containers_of(engine, maker)
    maker_api = as_worker("tools-a").api
    with pytest.raises(APIError, match="only to taskyard-handoff-"):
        maker_api.rename(container, "mine-forever")
    handle = maker.hand_off(60)["t:s"]
    maker.close_all()  # the maker exits; the handed-off container stays
    taker_api = as_worker("tools-b").api
    assert taker_api.inspect_container(container)["State"]["Running"]  # a peer may look
    _not_this_workers(taker_api.kill, container)  # but not act before taking it over
    taker = provider_as("tools-b", node="tools@b")
    taker.take_over("t:s", handle)
    assert taker.get("t:s").run("x + 1", TIMEOUT).result == "42"
    assert engine.api.inspect_container(container)["Name"] == (
        f"/taskyard-taken-tools-b-{container[:12]}"
    )
    _not_this_workers(maker_api.inspect_container, container)  # the maker's no more
    _not_this_workers(maker_api.attach_socket, container)
    assert container in [c["Id"] for c in taker_api.containers()]
    assert container not in [c["Id"] for c in maker_api.containers()]
    taker.close_all()  # the taker removes it as its own
    with pytest.raises(docker.errors.NotFound):
        engine.api.inspect_container(container)


def test_a_handed_off_container_is_taken_over_once(
    provider_as: MakeProvider, as_worker: Connect, engine: docker.DockerClient
) -> None:
    maker = provider_as("tools-a")
    maker.get("t:s").run("1", TIMEOUT)
    handle = maker.hand_off(60)["t:s"]
    maker.close_all()
    container = handle.rsplit("/", 1)[1].partition("#")[0]  # a fork server's: "...#<key>"
    takers = {name: as_worker(name).api for name in ("tools-b", "tools-c")}
    outcomes: dict[str, str] = {}
    ready = threading.Barrier(len(takers))

    def take(name: str) -> None:
        ready.wait()
        try:
            takers[name].attach_socket(container, params={"stdout": 1, "stream": 1}).close()
            outcomes[name] = "took"
        except APIError as exc:
            outcomes[name] = str(exc.explanation)

    threads = [threading.Thread(target=take, args=(name,)) for name in takers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    took = [name for name, said in outcomes.items() if said == "took"]
    assert len(took) == 1, outcomes
    (lost,) = set(takers) - set(took)
    assert "no longer handed off" in outcomes[lost] or "not this worker's" in outcomes[lost]
    assert engine.api.inspect_container(container)["Name"].endswith(f"-{container[:12]}")
    assert took[0] in engine.api.inspect_container(container)["Name"]
    engine.api.remove_container(container, force=True)
