"""compose.yaml stays true to the code: every setting it passes exists, every command names a
real module, every vLLM replica has a GPU and is in the proxy's pool, Redis keeps AOF on."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import services.agent_worker.metrics
import services.gateway.metrics  # noqa: F401 - registers the gateway's metrics
from scripts.settings_table import SERVICES as SETTINGS_CLASSES
from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.replicas.spec import load_pool
from services.llm_proxy.settings import ProxySettings
from services.tool_worker.metrics import SandboxCollector
from taskyard.agentkit.actions import action_queue
from taskyard.plumbing import keys
from taskyard.plumbing.settings import AgentWorkerSettings, ToolWorkerSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def _env(service: dict[str, Any]) -> dict[str, str]:
    return service.get("environment", {})


def _command(name: str) -> list[str]:
    return SERVICES[name]["command"]


def test_every_taskyard_variable_is_a_setting() -> None:
    known = {
        f"TASKYARD_{name.upper()}" for cls in SETTINGS_CLASSES.values() for name in cls.model_fields
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
        ("engine_proxy", "services.engine_proxy"),
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
    assert queues == [
        action_queue("IPythonInterpreter"),
        action_queue("WebBrowser.search"),
        keys.MCP_QUEUE,
    ]


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
    settings = ToolWorkerSettings(search_url=env["TASKYARD_SEARCH_URL"])
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
    settings = AgentWorkerSettings(**given)  # also checks the broker shares the store's server
    # Every greenlet may ack at once: kombu's pool must hold them (else jobs are lost).
    assert concurrency <= settings.broker_max_connections


# -- the monitoring profile ----------------------------------------------------------------

TASKYARD_SERVICES = ("gateway", "llm_proxy", "agent_worker", "tool_worker", "beat")


def _served_metrics_port(name: str) -> int:
    """Where a service serves /metrics: the gateway and the proxy on their own port, the
    Celery workers and beat on TASKYARD_METRICS_PORT."""
    command = _command(name)
    if "--port" in command:
        return int(command[command.index("--port") + 1])
    env = COMPOSE["x-taskyard"]["environment"] | _env(SERVICES[name])
    assert env["TASKYARD_METRICS_HOST"] == "0.0.0.0"  # reachable from Prometheus's container
    return int(env["TASKYARD_METRICS_PORT"])


def test_prometheus_scrapes_every_service_where_it_serves_metrics() -> None:
    for name in ("prometheus", "grafana", "jaeger", "flower"):
        assert SERVICES[name]["profiles"] == ["monitoring"]
    host_path, mounted = SERVICES["prometheus"]["volumes"][0].split(":")[:2]
    assert mounted == "/etc/prometheus/prometheus.yml"
    config = yaml.safe_load((ROOT / host_path).read_text())
    targets = {
        sd["names"][0]: sd["port"]
        for job in config["scrape_configs"]
        for sd in job.get("dns_sd_configs", [])
    }
    assert targets == {name: _served_metrics_port(name) for name in TASKYARD_SERVICES}


def test_the_gateways_processes_share_their_metrics() -> None:
    gateway = SERVICES["gateway"]
    assert int(gateway["command"][gateway["command"].index("--workers") + 1]) > 1
    directory = _env(gateway)["PROMETHEUS_MULTIPROC_DIR"]
    assert any(mount.split(":")[0] == directory for mount in gateway["tmpfs"])  # empty per start


def _exported_metric_names() -> set[str]:
    """Every sample name the services can export, from their metric definitions (the agent
    worker's, the gateway's and the tool worker's are on the default registry once imported)."""
    provider = SimpleNamespace(sessions=list, warm=0, starts=0)
    collectors = [REGISTRY, SandboxCollector(lambda: provider),
                  Metrics(SimpleNamespace(replicas=[]), {})]  # fmt: skip
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {
        family.name + suffix
        for collector in collectors
        for family in collector.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def test_the_grafana_dashboard_plots_metrics_the_services_export() -> None:
    volumes = dict(v.split(":")[:2][::-1] for v in SERVICES["grafana"]["volumes"])
    dashboards = ROOT / volumes["/var/lib/grafana/dashboards"]
    provisioning = ROOT / volumes["/etc/grafana/provisioning"]
    board = json.loads((dashboards / "taskyard.json").read_text())
    datasource = yaml.safe_load((provisioning / "datasources/prometheus.yaml").read_text())
    (source,) = datasource["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["uid"] == "prometheus"
    exported = _exported_metric_names()
    plotted = {
        name
        for panel in board["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\btaskyard_\w+", target["expr"])
    }
    assert len(board["panels"]) >= 10
    assert plotted and plotted <= exported, plotted - exported
    for figure in ("taskyard_queue_depth", "taskyard_agent_step_seconds_bucket",
                   "taskyard_model_call_seconds_bucket", "taskyard_tool_call_seconds_bucket",
                   "taskyard_tokens_total", "taskyard_sandboxes"):  # fmt: skip
        assert figure in plotted


def test_only_the_proxy_and_the_agent_workers_hold_the_token_secret() -> None:
    holders = {name for name, svc in SERVICES.items() if "TASKYARD_LLM_TOKEN_SECRET" in _env(svc)}
    assert holders == {"llm_proxy", "agent_worker"}  # never a tool worker: sandboxes run there


def test_only_the_engine_proxy_holds_the_engines_socket() -> None:
    """The tool workers reach the engine through the proxy alone, over a network only they and
    the proxy are on, with the token the proxy knows them by."""
    socket = "/var/run/docker.sock"
    holders = {n for n, s in SERVICES.items() if any(socket in v for v in s.get("volumes", []))}
    assert holders == {"engine_proxy"}
    tool, proxy = SERVICES["tool_worker"], SERVICES["engine_proxy"]
    assert _env(tool)["DOCKER_HOST"] == "tcp://engine_proxy:2375"
    assert _command("engine_proxy")[-2:] == ["--listen", "tcp://0.0.0.0:2375"]
    token = _env(tool)["TASKYARD_SANDBOX_ENGINE_TOKEN"]
    assert token.startswith("${TASKYARD_ENGINE_TOKEN:?")  # required, never a default
    assert _env(proxy)["TASKYARD_ENGINE_PROXY_CALLERS"] == "tool_worker=${TASKYARD_ENGINE_TOKEN}"
    on_engine = {n for n, s in SERVICES.items() if "engine" in s.get("networks", [])}
    assert on_engine == {"tool_worker", "engine_proxy"}
    assert COMPOSE["networks"]["engine"]["internal"]
    assert "user" not in tool  # the image's own user: no root needed without the socket
    holders = {n for n, s in SERVICES.items() if "TASKYARD_ENGINE_PROXY_CALLERS" in _env(s)}
    assert holders == {"engine_proxy"}
    assert _env(proxy)["TASKYARD_ENGINE_PROXY_RUNTIMES"] == _env(tool)["TASKYARD_SANDBOX_RUNTIME"]


def test_no_taskyard_service_mounts_a_named_volume() -> None:
    """No service reads another's disk: what crosses services (artifacts included) crosses
    Redis or the artifact store, so no service of the image mounts a named volume."""
    named = set(COMPOSE["volumes"])
    ours = {n: s for n, s in SERVICES.items() if s.get("image") == "taskyard/services:latest"}
    assert {"gateway", "tool_worker", "agent_worker"} <= set(ours)
    mounted = {n: [v.split(":")[0] for v in s.get("volumes", [])] for n, s in ours.items()}
    assert {n: sorted(named & set(m)) for n, m in mounted.items() if named & set(m)} == {}
    assert "TASKYARD_ARTIFACTS_BACKEND" in _env(SERVICES["gateway"])
    assert "TASKYARD_ARTIFACTS_BACKEND" in _env(SERVICES["tool_worker"])
