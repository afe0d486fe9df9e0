"""compose.yaml stays true to the code: every setting it passes exists, every command names a
real module, every vLLM replica has a GPU and is in the proxy's pool, Redis keeps AOF on."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.llm_proxy.config import ProxySettings, load_pool
from shared import keys
from shared.actions import action_queue
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def _env(service: dict[str, Any]) -> dict[str, str]:
    return service.get("environment", {})


def _command(name: str) -> list[str]:
    return SERVICES[name]["command"]


def test_every_taskyard_variable_is_a_setting() -> None:
    known = {
        f"TASKYARD_{name.upper()}" for name in (*Settings.model_fields, *ProxySettings.model_fields)
    }
    passed = {key for svc in SERVICES.values() for key in _env(svc) if key.startswith("TASKYARD_")}
    assert passed and passed <= known, passed - known


@pytest.mark.parametrize(
    ("service", "module"),
    [
        ("gateway", "services.gateway.app"),
        ("llm_proxy", "services.llm_proxy"),
        ("agent_worker", "services.agent_worker.worker"),
        ("tool_worker", "services.tool_worker.worker"),
    ],
)
def test_commands_name_real_modules(service: str, module: str) -> None:
    command = " ".join(_command(service))
    assert module in command
    assert importlib.util.find_spec(module) is not None


def test_workers_consume_the_queues_tasks_are_sent_to() -> None:
    agent = _command("agent_worker")
    tools = _command("tool_worker")
    assert agent[agent.index("-Q") + 1].split(",") == [keys.AGENT_QUEUE, keys.WEBHOOK_QUEUE]
    queues = tools[tools.index("-Q") + 1].split(",")
    assert queues == [action_queue("IPythonInterpreter"), action_queue("WebBrowser.search")]


def test_vllm_replicas_have_gpus_and_are_in_the_pool() -> None:
    replicas = [name for name in SERVICES if name.startswith("vllm-")]
    assert len(replicas) >= 2
    for name in replicas:
        devices = SERVICES[name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"]
    pool_file = ROOT / "deploy/pool.yaml"
    pool = load_pool(ProxySettings(proxy_pool_file=str(pool_file)))
    assert sorted(r.host for r in pool.replicas) == sorted(replicas)
    assert {r.model for r in pool.replicas} == {_env(SERVICES["gateway"])["TASKYARD_DEFAULT_MODEL"]}


def test_redis_keeps_an_append_only_file() -> None:
    command = _command("redis")
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] in {"everysec", "always"}


def test_the_tool_worker_searches_the_searxng_of_the_search_profile() -> None:
    searxng = SERVICES["searxng"]
    assert searxng["profiles"] == ["search"]
    env = _env(SERVICES["tool_worker"])
    settings = Settings(search_url=env["TASKYARD_SEARCH_URL"])
    assert settings.search_url == "http://searxng:8080"  # the service, at the image's port
    host_path, mounted = searxng["volumes"][0].split(":")[:2]
    assert mounted == "/etc/searxng/settings.yml"
    searx = yaml.safe_load((ROOT / host_path).read_text())
    assert "json" in searx["search"]["formats"]  # else SearxNG answers format=json with 403
    assert searx["server"]["limiter"] is False  # the tool workers are its only clients
    assert "secret_key" not in searx["server"]  # it comes from SEARXNG_SECRET, never the repo
    assert "SEARXNG_SECRET" in searxng["environment"]


def test_no_service_lets_the_browser_open_private_addresses() -> None:
    for service in SERVICES.values():
        env = _env(service)
        assert env.get("TASKYARD_BROWSE_ALLOW_PRIVATE", "false") == "false"
        assert not env.get("TASKYARD_BROWSE_ALLOW_NETWORKS")


def test_the_agent_worker_runs_on_gevent_within_its_broker_connections() -> None:
    agent = _command("agent_worker")
    assert agent[agent.index("--pool") + 1] == "gevent"
    concurrency = int(agent[agent.index("-c") + 1])
    env = COMPOSE["x-taskyard"]["environment"] | _env(SERVICES["agent_worker"])
    given = {k.removeprefix("TASKYARD_").lower(): v for k, v in env.items() if "$" not in v}
    settings = Settings(**given)  # also checks the broker shares the store's server
    # Every greenlet may ack at once: kombu's pool must hold them (else jobs are lost).
    assert concurrency <= settings.broker_max_connections
