"""compose.dev.yaml, the route for a laptop with Docker and no GPU, resolved by Docker Compose
itself (`docker compose config`, the version `make test` installs) over compose.yaml: the
scripted model takes the vLLM replicas' place, every image is built from this repository, and
the demo waits for a gateway that answers. compose.yaml alone still resolves as production."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV = ["-f", "compose.yaml", "-f", "compose.dev.yaml", "--env-file", "deploy/dev.env"]


def _config(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        ["docker", "compose", *args, "config", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


@pytest.fixture(scope="module")
def dev() -> dict[str, Any]:
    services: dict[str, Any] = _config(*DEV)["services"]
    return services


def test_no_vllm_replica_starts_and_the_proxy_waits_on_none(dev: dict[str, Any]) -> None:
    assert not [name for name in dev if name.startswith("vllm")]
    assert set(dev["llm_proxy"]["depends_on"]) == {"redis", "scripted_model"}
    assert "volumes" not in dev["llm_proxy"] or dev["llm_proxy"]["volumes"] == []


def test_the_proxy_routes_to_the_scripted_model_under_the_default_model_name(
    dev: dict[str, Any],
) -> None:
    proxy_env = dev["llm_proxy"]["environment"]
    assert proxy_env["TASKYARD_PROXY_POOL_FILE"] == ""
    command = dev["scripted_model"]["command"]
    assert command[:3] == ["python", "-m", "devstack.scripted_model"]
    port = command[command.index("--port") + 1]
    assert proxy_env["TASKYARD_PROXY_UPSTREAMS"] == f"http://scripted_model:{port}/v1"
    assert command[command.index("--model") + 1] == proxy_env["TASKYARD_DEFAULT_MODEL"]


def test_the_sandbox_image_is_built_with_the_packages_the_local_build_uses(
    dev: dict[str, Any],
) -> None:
    built = dev["sandbox_image"]
    assert built["image"] == dev["tool_worker"]["environment"]["TASKYARD_SANDBOX_IMAGE"]
    script = (ROOT / "scripts/build_sandbox_image.sh").read_text()
    packages = re.search(r'PACKAGES="\$\{SANDBOX_PACKAGES:-([^}]+)\}"', script)
    assert packages, "the default package list moved"
    assert built["build"]["args"]["PACKAGES"].split() == packages.group(1).split(",")
    assert "sandbox_image" in dev["tool_worker"]["depends_on"]


def test_the_demo_waits_for_a_ready_gateway_and_uses_a_key_it_accepts(
    dev: dict[str, Any],
) -> None:
    demo = dev["demo"]
    assert demo["depends_on"]["gateway"]["condition"] == "service_healthy"
    assert "/readyz" in " ".join(dev["gateway"]["healthcheck"]["test"])
    key = demo["environment"]["TASKYARD_API_KEY"]
    keys = dev["gateway"]["environment"]["TASKYARD_API_KEYS"]
    assert f"{key}=" in keys
    assert demo["command"][:2] == ["taskyard", "submit"]
    assert demo["environment"]["TASKYARD_URL"] == "http://gateway:8000"


def test_every_taskyard_image_is_built_here(dev: dict[str, Any]) -> None:
    ours = {name: svc for name, svc in dev.items() if svc["image"].startswith("taskyard/")}
    assert {"gateway", "scripted_model", "sandbox_image", "demo"} <= set(ours)
    built = {svc["image"] for svc in ours.values() if "build" in svc}
    assert {svc["image"] for svc in ours.values()} <= built


def test_production_still_needs_its_secrets_and_keeps_its_gpus() -> None:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin"}
    missing = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "config"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    secrets = {"TASKYARD_API_KEYS": "k=t", "TASKYARD_LLM_TOKEN_SECRET": "x" * 64, "MODEL": "m",
               "TASKYARD_ENGINE_TOKEN": "e" * 64}  # fmt: skip
    # Compose names one missing variable, whichever it meets first (the order varies).
    assert missing.returncode != 0 and "required variable" in missing.stderr
    assert any(f"variable {name} is missing" in missing.stderr for name in secrets)
    services = _config("-f", "compose.yaml", env={**env, **secrets})["services"]
    assert {"vllm-0", "vllm-1"} <= set(services) and "scripted_model" not in services
    assert "demo" not in services
