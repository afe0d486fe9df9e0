"""pyproject.toml declares what the code imports, and the base install is the agent library
alone: a Python with no service package (Celery, FastAPI, Docker, uvloop, ...) runs an agent."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from devstack.scripted_model import ScriptedModelThread

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# The services' packages, by import name, with the distribution name that provides each.
SERVICE_PACKAGES = {
    "celery": "celery",
    "kombu": "kombu",
    "fastapi": "fastapi",
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "uvloop": "uvloop",
    "gevent": "gevent",
    "docker": "docker",
    "opentelemetry": "opentelemetry-",  # every opentelemetry-* distribution
    "prometheus_client": "prometheus-client",
    "structlog": "structlog",
    "trafilatura": "trafilatura",
    "requests": "requests",
    "boto3": "boto3",
    "botocore": "botocore",
}
# Imported only where present, never required: optional tokenizers, and matplotlib and
# cloudpickle, which only the sandbox image's kernel imports (a Debian package there).
OPTIONAL_IMPORTS = {"tiktoken", "transformers", "matplotlib", "cloudpickle"}
# Imported for the type checker only (under TYPE_CHECKING), from the dev extra's stubs.
TYPE_ONLY_IMPORTS = {"mypy_boto3_s3"}
# Declared and used without an import of their own.
USED_UNIMPORTED = {
    "uvicorn",  # the gateway's server, run as a command (Dockerfile, compose.yaml)
    "python-multipart",  # FastAPI's form parser, for session file uploads
    "lxml-html-clean",  # imported by jusText, trafilatura's
    "taskyard",  # the service extra names the web one
}

# Refuses the service packages (as if not installed), imports the library, runs an agent
# (sync on httpx, async on aiohttp) against the model at argv[1], and prints what it got.
_LIBRARY_RUN = """
import asyncio, importlib.abc, json, sys

REFUSED = set(sys.argv[2].split(","))
already = sorted(REFUSED & {name.split(".")[0] for name in sys.modules})

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"refused: {name}", name=name)
        return None

sys.meta_path.insert(0, Refuse())

import taskyard.agentkit.actions, taskyard.agentkit.aggregators, taskyard.agentkit.memory
import taskyard.agentkit.parsers, taskyard.client
from taskyard.agentkit.agents import Agent, AsyncAgent
from taskyard.agentkit.llms import AsyncOpenAIChat, OpenAIChat

url = sys.argv[1]
reply = Agent(OpenAIChat(base_url=url, model="scripted"))("hi", session_id=1)

async def async_call():
    llm = AsyncOpenAIChat(base_url=url, model="scripted")
    try:
        return (await AsyncAgent(llm)("hello", session_id=1)).content
    finally:
        await llm.close()

loaded = sorted(REFUSED & {name.split(".")[0] for name in sys.modules})
print(json.dumps({"already": already, "sync": reply.content, "async": asyncio.run(async_call()),
                  "loaded": loaded}))
"""


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _declared() -> set[str]:
    extras = [
        r for extra, rs in PROJECT["optional-dependencies"].items() if extra != "dev" for r in rs
    ]
    return {_name(r) for r in [*PROJECT["dependencies"], *extras]}


def _imported_top_level() -> set[str]:
    """The top-level names every module of shared/ and services/ imports, stdlib excluded."""
    names: set[str] = set()
    for path in [*ROOT.glob("shared/**/*.py"), *ROOT.glob("services/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"taskyard", "services"}


@functools.cache
def _providers() -> Mapping[str, list[str]]:
    """Import name -> distributions providing it (a walk over every installed one: once)."""
    return importlib.metadata.packages_distributions()


def _distributions(import_name: str) -> set[str]:
    return {_name(d) for d in _providers().get(import_name, [])}


def test_base_dependencies_name_no_service_package() -> None:
    base = [_name(r) for r in PROJECT["dependencies"]]
    assert base, "no base dependencies read"
    clashes = [n for n in base for d in SERVICE_PACKAGES.values() if n == d or n.startswith(d)]
    assert clashes == []


def test_the_service_extra_holds_the_service_packages() -> None:
    service = {_name(r) for r in PROJECT["optional-dependencies"]["service"]}
    declared = _declared()
    missing = [d for d in SERVICE_PACKAGES.values() if not any(n.startswith(d) for n in declared)]
    assert missing == []
    assert "requests" in service  # the docker sandbox provider's, with the Docker SDK
    assert "starlette" in service  # the gateway imports it directly


def test_every_imported_package_is_declared() -> None:
    declared = _declared()
    undeclared = sorted(
        name
        for name in _imported_top_level() - OPTIONAL_IMPORTS - TYPE_ONLY_IMPORTS
        if not _distributions(name) & declared
    )
    assert undeclared == []


def test_every_declared_package_is_imported() -> None:
    imported = set().union(*(_distributions(n) for n in _imported_top_level()))
    assert sorted(_declared() - imported - USED_UNIMPORTED) == []


def test_the_library_runs_an_agent_without_service_packages() -> None:
    refused = ",".join(SERVICE_PACKAGES)
    with ScriptedModelThread() as model:
        done = subprocess.run(
            [sys.executable, "-c", _LIBRARY_RUN, model.base_url, refused],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["already"] == [] and result["loaded"] == []
    assert result["sync"].startswith("You said: hi")
    assert result["async"].startswith("You said: hello")
