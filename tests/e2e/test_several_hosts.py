"""Hosts, not processes: Redis, the scripted model, the proxy, the gateway, two agent workers,
three tool workers and beat each on a host of its own (a network namespace with its own
address, /tmp and hostname, on a bridge this module makes and removes), reaching one another
by address only, as compose on several machines runs them. A task using an uploaded file, a
figure, approvals and a webhook (its receiver on a host too) works through the gateway's
address; a tool host taken away mid-run costs its own sessions their state, each told why
once, and nothing else."""

from __future__ import annotations

import ipaddress
import json
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from e2e_support import QUICK_RECOVERY, delivered
from hosts_support import run_on
from scale_support import LOST, cell, holder, kept, number, task_output, worker_process

from devstack.hosts import RANGE, HostNetwork
from devstack.procs import Child, Processes
from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.client.webhooks import verify
from taskyard.runtime.events import EventKind

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

ENV = {
    **QUICK_RECOVERY,
    "TASKYARD_SANDBOX_MAX_PER_TENANT": "32", "TASKYARD_SANDBOX_WARM_POOL": "2",
}  # fmt: skip
SINK = Path(__file__).resolve().parent / "webhook_sink.py"
CSV = b"month,sales\n1,10\n2,14\n3,9\n4,17\n"
# Two calls of the code tool, each held for approval; each reads the upload, draws a figure
# (titled by the call, so the two differ) and writes a file.
PLOT = (
    "Plot the sales, repeat 2 times.\n```python\nimport pandas as pd\n"
    "import matplotlib.pyplot as plt\ncalls = globals().get('calls', 0) + 1\n"
    "df = pd.read_csv('sales.csv')\ndf.plot(x='month', y='sales', title=f'call {calls}')\n"
    "plt.show()\nopen('summary.txt', 'w').write(f'mean {df.sales.mean()}')\n"
    "print('call', calls, 'mean', df.sales.mean())\n```"
)
GATED = {"approval": {"tools": ["IPythonInterpreter"]}}
CELLS = 4


@dataclass
class Receiver:
    """The webhook receiver on its host: its URL and what it was sent."""

    url: str
    child: Child

    def deliveries(self) -> list[tuple[dict[str, str], bytes]]:
        lines = [line for line in self.child.log_text().splitlines() if line.startswith("{")]
        return [(d["headers"], d["body"].encode()) for d in map(json.loads, lines)]


@pytest.fixture(scope="module")
def hosted(sandbox_image: str) -> Iterator[tuple[LocalStack, HostNetwork]]:
    stack = LocalStack(sandbox_backend="docker", agent_workers=2, tool_workers=3, extra_env=ENV)
    with HostNetwork([*stack.commands(), "hook"]) as network:
        stack.hosts = network.hosts
        stack.start()
        try:
            yield stack, network
        finally:
            stack.stop()


@pytest.fixture(scope="module")
def stack(hosted: tuple[LocalStack, HostNetwork]) -> LocalStack:
    return hosted[0]


@pytest.fixture(scope="module")
def network(hosted: tuple[LocalStack, HostNetwork]) -> HostNetwork:
    return hosted[1]


@pytest.fixture(scope="module")
def receiver(stack: LocalStack, network: HostNetwork) -> Iterator[Receiver]:
    host = network["hook"]
    with Processes(log_dir=stack.run_dir) as procs:
        child = procs.start("hook", host.argv([sys.executable, str(SINK), "--host", host.address]))
        yield Receiver(child.announced_url() + "/hook", child)


def test_every_service_has_an_address_and_a_tmp_of_its_own(
    stack: LocalStack, network: HostNetwork
) -> None:
    addresses = {name: stack.address(name) for name in stack.commands()}
    assert len(set(addresses.values())) == len(addresses) == 11  # the engine proxy has its own
    assert all(ipaddress.ip_address(a) in RANGE for a in addresses.values())
    for name, url in stack.metrics_urls.items():  # each bound its host's address
        assert url.startswith(f"http://{addresses[name]}:")
        assert httpx.get(url, timeout=5).status_code == 200, name
    # From the gateway's host, Redis is at its address, not on loopback.
    port = stack.ports.redis
    assert run_on(network["gateway"], _connect(addresses["redis"], port)) == "connected\n"
    assert run_on(network["gateway"], _connect("127.0.0.1", port)) == "ConnectionRefusedError\n"
    # Redis keeps its append-only file in its host's /tmp, which no other host sees.
    listing = "import os; print('appendonlydir' in os.listdir('/tmp'))"
    assert run_on(network["redis"], listing) == "True\n"
    assert run_on(network["gateway"], listing) == "False\n"


@dataclass
class Charted:
    """The multi-tool task, run once: its id, its session, the calls a person approved."""

    task_id: str
    session: str
    approved: list[str]


@pytest.fixture(scope="module")
def charted(stack: LocalStack, receiver: Receiver) -> Charted:
    """Upload a CSV, then a task whose two calls each wait for approval, read it, draw a figure
    and write a file, with a webhook to the receiver's host; approved as they come."""
    session = f"hosts-{uuid.uuid4().hex[:6]}"
    with TaskyardClient(stack.gateway_url, stack.api_key) as client:
        client.upload(session, CSV, "sales.csv")
        hook = {"url": receiver.url, "events": ["waiting_approval", "succeeded"]}
        task_id = client.submit(PLOT, session_id=session, agent=GATED, files=["sales.csv"],
                                webhook=hook)["id"]  # fmt: skip
        return Charted(task_id, session, _approve_each(client, task_id))


def test_files_a_figure_approvals_and_a_webhook_through_the_gateways_address(
    client: TaskyardClient, receiver: Receiver, charted: Charted
) -> None:
    assert len(charted.approved) == 2
    task = client.get(charted.task_id)
    assert task["status"] == "succeeded", task
    assert "call 2 mean 12.5" in task["result"]  # the second call saw the first one's state
    assert client.download(charted.session, "summary.txt") == b"mean 12.5"  # the cell wrote it

    told = delivered(client, charted.task_id, 3)
    assert [t["type"] for t in told] == ["task.waiting_approval"] * 2 + ["task.succeeded"]
    secret = client.webhook_secret()
    for headers, body in receiver.deliveries():
        verify(secret, headers, body)
    assert [h["webhook-id"] for h, _ in receiver.deliveries()] == [t["event_id"] for t in told]

    figures = _figures(client, charted.task_id)
    assert len({f["name"] for f in figures}) == 2
    assert [a["name"] for a in client.artifacts(charted.task_id)] == [f["name"] for f in figures]


def test_a_figure_made_on_a_tool_host_is_served_from_the_gateways(
    client: TaskyardClient, charted: Charted
) -> None:
    """Written on one host, read on another: through the artifact store, not a directory."""
    for figure in _figures(client, charted.task_id):
        png = client.http.get(figure["url"])
        assert png.status_code == 200, png.text
        assert _png_size(png.content) == (640, 480) and len(png.content) == figure["size"]


def test_a_tool_host_taken_away_costs_its_own_sessions_their_state_once(
    stack: LocalStack, network: HostNetwork, client: TaskyardClient
) -> None:
    names = [f"hosts-{uuid.uuid4().hex[:6]}-{n}" for n in range(1, 13)]
    outputs = {s: [out] for s, out in _round(client, names, 0).items()}  # each has state
    held = {session: holder(client, session) for session in names}
    node = Counter(n for n in held.values() if n).most_common(1)[0][0]
    victims = {s for s, n in held.items() if n == node}
    assert 0 < len(victims) < len(names), held  # sessions on other hosts are there to keep
    name = worker_process(stack, node)
    assert node.endswith(f"@{network[name].hostname}")  # %h: its host's name
    in_flight = {s: client.submit(cell(number(s), 1), session_id=s)["id"] for s in names}
    stack.kill(name)
    network.remove(name)  # the machine is gone, and its address with it
    for session, task_id in in_flight.items():  # every task ends, and succeeds
        outputs[session].append(task_output(client, task_id, timeout=60))
    for index in range(2, CELLS):
        for session, out in _round(client, names, index).items():
            outputs[session].append(out)

    notes = {session: sum(LOST in o for o in out) for session, out in outputs.items()}
    assert {s: notes[s] for s in victims} == dict.fromkeys(victims, 1), outputs
    for session in victims:  # told once, and why
        said = next(o for o in outputs[session] if LOST in o)
        assert f"its tool worker {node} stopped answering" in said
        assert "call this tool with `%replay`" in said  # its cells, kept in Redis, may re-run
    others = {s: out for s, out in outputs.items() if s not in victims}
    assert {s: out for s, out in others.items() if not kept(out, s, CELLS) or notes[s]} == {}


def _connect(address: str, port: int) -> str:
    """Python code printing whether a TCP connection to address:port opens, or the error."""
    return (
        "import socket\ntry:\n"
        f"    socket.create_connection(('{address}', {port}), timeout=2); print('connected')\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
    )


def _approve_each(client: TaskyardClient, task_id: str) -> list[str]:
    """Approve every call the task holds until it ends; the calls approved."""
    approved: list[str] = []
    deadline = time.monotonic() + 90
    while (task := client.get(task_id))["status"] not in {"succeeded", "failed"}:
        assert time.monotonic() < deadline, task
        pending = [a["call_id"] for a in task.get("approvals", []) if a["state"] == "pending"]
        for call_id in pending:
            assert client.approve(task_id, call_id)["state"] == "approved"
        approved += pending
        time.sleep(0 if pending else 0.1)
    return approved


def _figures(client: TaskyardClient, task_id: str) -> list[dict]:
    return [e.data for e in client.events(task_id)
            if e.kind == EventKind.ARTIFACT and e.data["kind"] == "figure"]  # fmt: skip


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _round(client: TaskyardClient, names: list[str], index: int) -> dict[str, str]:
    """Cell `index` of every session at once; their outputs."""
    ids = {session: client.submit(cell(number(session), index), session_id=session)["id"]
           for session in names}  # fmt: skip
    return {session: task_output(client, task_id, timeout=60) for session, task_id in ids.items()}
