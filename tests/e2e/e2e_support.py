"""Helpers the end-to-end tests share."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from devstack.stack import LocalStack
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.client import TaskyardClient

ENDED = frozenset({"succeeded", "failed"})
# For stacks whose tests stop or kill tool workers: a silent one is gone after 2 s, and the
# sweep runs often and re-sends what stands.
QUICK_RECOVERY = {
    "TASKYARD_TOOL_WORKER_BEAT_S": "0.3", "TASKYARD_TOOL_WORKER_DEAD_S": "2",
    "TASKYARD_SWEEP_INTERVAL_S": "0.5", "TASKYARD_STALL_S": "4",
    "TASKYARD_VISIBILITY_TIMEOUT_S": "6",
}  # fmt: skip


def wait_status(
    client: TaskyardClient,
    task_id: str,
    statuses: frozenset[str] | set[str] = ENDED,
    timeout: float = 60,
) -> dict:
    """Poll the task until it is in one of `statuses`; fail (not hang) after `timeout`."""
    deadline = time.monotonic() + timeout
    while (task := client.get(task_id))["status"] not in statuses:
        assert time.monotonic() < deadline, f"task {task_id} never reached {statuses}: {task}"
        time.sleep(0.1)
    return task


def delivered(client: TaskyardClient, task_id: str, count: int) -> list[dict]:
    """The task's webhook deliveries once `count` of them were delivered; fail after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        told = client.get(task_id)["webhook_deliveries"]
        if sum(t["state"] == "delivered" for t in told) >= count:
            return list(told)
        assert time.monotonic() < deadline, told
        time.sleep(0.1)


def configure_model(stack: LocalStack, **config: object) -> None:
    """Change the stack's scripted model on the fly (`latency_ms`, ...: /scripted/config)."""
    url = f"{stack.model_url}/scripted/config"
    httpx.post(url, json=config, timeout=5).raise_for_status()


def tool_output(task: dict) -> str:
    """What the task's one tool call printed, and its error if any (the third message)."""
    content = AgentMessage.model_validate(task["messages"][2]).content
    assert isinstance(content, ActionReturn)
    return content.format_result() + (content.errmsg or "")


def cell_output(client: TaskyardClient, code: str, session: str, timeout: float = 60) -> str:
    """Run `code` as one task's cell in `session`; what it printed (and its error)."""
    task = client.submit(f"```python\n{code}\n```", session_id=session)
    done = wait_status(client, task["id"], timeout=timeout)
    assert done["status"] == "succeeded", done
    return tool_output(done)


class HookReceiver(ThreadingHTTPServer):
    """A webhook receiver on loopback: answers each POST with the next of `codes` (200 once
    they run out) and keeps its headers (lower-cased) and body."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HookHandler)
        self.codes: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 60) -> list[tuple[dict[str, str], bytes]]:
        """What it received, once that is `count` requests; fail after `timeout`."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, self.received
            time.sleep(0.05)
        return self.received


class _HookHandler(BaseHTTPRequestHandler):
    server: HookReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(self.server.codes.pop(0) if self.server.codes else 200)
        self.end_headers()

    def log_message(self, *_: object) -> None:  # quiet
        pass
