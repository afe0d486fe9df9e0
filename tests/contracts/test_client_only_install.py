"""The client install (`pip install <checkout>`, no extras) works on its own. In a clean
virtualenv holding only what that installs (tests/client_venv.py: made offline, from this
venv's distributions and a wheel built from the checkout): one package, `taskyard`; the
clients and the receivers' `verify` import with no service package there to import; a delivery
the deliverer signed checks out; `taskyard --help` lists the commands; `taskyard up` says in
one line what it needs; and the client commands talk to a real gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_venv import PROJECT, ClientVenv, make_client_venv
from gateway.gateway_support import GatewayProcess

from taskyard.agentkit.spec import WebhookSpec
from taskyard.runtime.task import TaskRecord
from taskyard.runtime.webhooks.payloads import delivery

# What the services run on, and the client must do without (none is a base requirement).
SERVICE_PACKAGES = ["celery", "kombu", "fastapi", "starlette", "uvicorn", "docker", "gevent"]
ARGS = ["--api-key", "key-a"]

# Imports what a client and a webhook receiver use; says which service packages could be
# found, which were loaded (redis is a base requirement, for the agent library's memory: the
# client must not load it), and what stops the server side's webhooks from importing.
_IMPORTS = """
import importlib, importlib.util, json, sys
from taskyard.client import AsyncTaskyardClient, TaskyardClient
from taskyard.client.webhooks import InvalidSignature, verify
import taskyard.client.cli

found = [name for name in sys.argv[1:] if importlib.util.find_spec(name) is not None]
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"redis", *sys.argv[1:]})
try:
    importlib.import_module("taskyard.runtime.webhooks")
    server_side = None
except ModuleNotFoundError as exc:
    server_side = exc.name
print(json.dumps({"found": found, "loaded": loaded, "server_side": server_side}))
"""

# Verifies the delivery on stdin ({"secret", "headers", "body"}), then the same tampered with.
_VERIFY = """
import json, sys
from taskyard.client.webhooks import InvalidSignature, verify

sent = json.load(sys.stdin)
body = sent["body"].encode()
verify(sent["secret"], sent["headers"], body)
try:
    verify(sent["secret"], sent["headers"], body + b" ")
except InvalidSignature as exc:
    print(f"checked; tampered: {exc}")
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> ClientVenv:
    return make_client_venv(tmp_path_factory.mktemp("client-install"))


@pytest.fixture(scope="module")
def gateway(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = GatewayProcess(redis_server, tmp_path_factory.mktemp("gateway") / "gateway.log")
    with process as url:
        yield url


def test_the_distribution_installs_one_package_taskyard(venv: ClientVenv) -> None:
    info = f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    rows = (venv.site_packages / info / "RECORD").read_text().splitlines()
    tops = {row.split("/")[0] for row in rows if not row.startswith("..")}
    assert tops == {"taskyard", info}
    outside = [row.split(",")[0] for row in rows if row.startswith("..")]
    assert outside == ["../../../bin/taskyard"]  # the console script, and nothing else
    strays = ["shared", "services", "devstack"]
    assert [name for name in strays if (venv.site_packages / name).exists()] == []


def test_the_clients_and_verify_import_without_any_service_package(
    venv: ClientVenv, tmp_path: Path
) -> None:
    ran = venv.run("python", "-c", _IMPORTS, *SERVICE_PACKAGES, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said["found"] == []  # a client install: none of them is there to import
    assert said["loaded"] == []
    assert said["server_side"] == "celery"  # the deliverer's side needs the service extra


def test_a_delivery_the_deliverer_signed_checks_out_with_the_gateway_s_secret(
    venv: ClientVenv, gateway: str, tmp_path: Path
) -> None:
    asked = venv.run("taskyard", "--gateway", gateway, *ARGS, "webhook-secret", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    secret = asked.stdout.strip()
    assert secret.startswith("whsec_")
    record = TaskRecord(tenant="tenant-a", session_id="s1", input="hi",
                        webhook=WebhookSpec(url="https://receiver.example/hook"))  # fmt: skip
    assert record.webhook is not None
    sent = delivery(record, record.webhook, "1700000000000-0", {"status": "succeeded"}, secret)
    offered = {"secret": secret, "headers": sent.headers, "body": sent.body.decode()}
    checked = venv.run("python", "-c", _VERIFY, cwd=tmp_path, stdin=json.dumps(offered))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == "checked; tampered: no webhook-signature matches\n"


def test_help_lists_the_commands(venv: ClientVenv, tmp_path: Path) -> None:
    listing = venv.run("taskyard", "--help", cwd=tmp_path)
    assert (listing.returncode, listing.stderr) == (0, "")
    assert listing.stdout.startswith("usage: taskyard")
    for command in ("submit", "get", "follow", "webhook-secret", "up"):
        assert f"\n    {command} " in listing.stdout


def test_up_says_in_one_line_that_it_is_for_a_checkout(venv: ClientVenv, tmp_path: Path) -> None:
    up = venv.run("taskyard", "up", cwd=tmp_path)
    assert (up.returncode, up.stdout) == (2, "")
    assert "Traceback" not in up.stderr and up.stderr.count("\n") == 1
    assert up.stderr.startswith("taskyard: up is a development command: run `make up` in a ")


def test_submit_and_get_against_a_real_gateway(
    venv: ClientVenv, gateway: str, tmp_path: Path
) -> None:
    taskyard = ["taskyard", "--gateway", gateway, *ARGS]
    submitted = venv.run(*taskyard, "submit", "hello", "--session", "c1", "--no-follow",
                         cwd=tmp_path)  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.split()[1]
    assert submitted.stdout == f"task {task_id} (session c1)\n"
    got = venv.run(*taskyard, "get", task_id, cwd=tmp_path)  # no workers here: it waits
    assert (got.returncode, got.stderr) == (0, "")
    assert got.stdout == f"{task_id}: queued\nresult: None\nerror: None\n"
