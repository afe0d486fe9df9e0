"""Hand-offs that ended, removed by the proxy (services/engine_proxy/reaper.py), on the real
engine: only a container made through the proxy, named as handed off, and no longer running;
and a started proxy does it on its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker.models.containers import Container

from devstack.engine_proxy import raw_engine
from services.engine_proxy import EngineProxy, EngineProxySettings
from services.engine_proxy.engine import Engine
from services.engine_proxy.holdings import Holdings
from services.engine_proxy.ownership import CALLER_LABEL, HANDOFF_PREFIX
from services.engine_proxy.reaper import Reaper


class _Made:
    """Containers as a worker's sandboxes would leave them, removed at the test's end."""

    def __init__(self, engine: docker.DockerClient, image: str) -> None:
        self.engine, self.image = engine, image
        self.made: list[Container] = []

    def container(self, *, proxied: bool, handed_off: bool, running: bool) -> Container:
        labels = {CALLER_LABEL: "tools-a"} if proxied else {}
        command = ["sleep", "60"] if running else ["true"]
        made = self.engine.containers.run(
            self.image, entrypoint=command, labels=labels, network_mode="none", detach=True
        )
        self.made.append(made)
        if not running:
            made.wait(timeout=30)
        if handed_off:
            made.rename(f"{HANDOFF_PREFIX}{made.id[:12]}")
        return made

    def exists(self, container: Container) -> bool:
        try:
            container.reload()
        except docker.errors.NotFound:
            return False
        return True

    def remove_all(self) -> None:
        for container in self.made:
            if self.exists(container):
                container.remove(force=True)


@pytest.fixture
def made(engine: docker.DockerClient, sandbox_image: str) -> Iterator[_Made]:
    containers = _Made(engine, sandbox_image)
    yield containers
    containers.remove_all()


async def test_only_ended_hand_offs_of_proxied_containers_are_removed(made: _Made) -> None:
    ended = made.container(proxied=True, handed_off=True, running=False)
    running = made.container(proxied=True, handed_off=True, running=True)
    not_handed = made.container(proxied=True, handed_off=False, running=False)
    not_ours = made.container(proxied=False, handed_off=True, running=False)
    engine = Engine(raw_engine())
    try:
        removed = await Reaper(engine, Holdings(engine), every_s=60).reap()
    finally:
        await engine.close()
    assert removed >= 1  # others' ended hand-offs on this engine go too
    assert not made.exists(ended)
    assert made.exists(running)  # a peer may still take it over
    assert made.exists(not_handed)  # its maker's, which removes it at its next start
    assert made.exists(not_ours)  # not made through the proxy: someone else's


async def test_a_started_proxy_removes_ended_hand_offs_on_its_own(
    made: _Made, tmp_path: Path
) -> None:
    settings = EngineProxySettings(
        engine_proxy_listen=f"unix://{tmp_path}/proxy.sock",
        engine_proxy_engine=raw_engine(),
        engine_proxy_callers=f"tools-a={'a' * 32}",  # type: ignore[arg-type]
        engine_proxy_reap_s=0.2,
    )
    proxy = EngineProxy(settings)
    await proxy.start()
    try:
        ended = made.container(proxied=True, handed_off=True, running=False)
        deadline = time.monotonic() + 10
        while made.exists(ended) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not made.exists(ended)
    finally:
        await proxy.close()
