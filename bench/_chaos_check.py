"""The chaos run's verdict: watch the accepted tasks drain, then read every one back and
count what the module docstring of `chaos_run.py` defines (lost, duplicated, wrong, stuck,
tools that ran more than once)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis
from _chaos_workload import TOKEN, ChaosTask

from devstack.stack import LocalStack
from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys
from taskyard.plumbing.settings import parse_api_keys

__all__ = ["Drain", "Verdict", "read_back", "watch_drain"]

_ENDED = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
_KINDS = ("user", "call", "result", "answer")  # a two-step task's messages, in order
_RUNS = re.compile(r"runs=(\d+) reran=\[([\d, ]*)\]")
_TOOL_CALL_LOG = "tool call IPythonInterpreter"


@dataclass(frozen=True, slots=True)
class Drain:
    """When the last task ended, in seconds after the chaos stopped (0: all ended during
    it); the ids still not ended when the deadline passed."""

    last_end_s: float
    pending: frozenset[str]


def watch_drain(redis_url: str, ids: Iterable[str], since: float, timeout_s: float) -> Drain:
    """Poll the task hashes from `since` (a `time.monotonic()`) until every task has ended
    or is gone, or `timeout_s` passed."""
    client = redis.Redis.from_url(f"{redis_url}/0", decode_responses=True)
    pending, last = set(ids), since
    try:
        while pending and time.monotonic() < since + timeout_s:
            batch = list(pending)
            pipe = client.pipeline(transaction=False)
            for task_id in batch:
                pipe.hget(keys.task(task_id), "status")
            now = time.monotonic()
            for task_id, status in zip(batch, pipe.execute(), strict=True):
                if status is None or status in _ENDED:  # a vanished hash never comes back
                    pending.discard(task_id)
                    last = now
            time.sleep(0.1)
    finally:
        client.close()
    return Drain(max(0.0, last - since), frozenset(pending))


@dataclass
class Verdict:
    """Task ids (or tokens) per finding; `lost` and `stuck` keyed by reason or status."""

    accepted: int = 0
    succeeded: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    lost: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    stuck: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    dup_transcript: list[str] = field(default_factory=list)
    dup_memory: list[str] = field(default_factory=list)
    memory_incomplete: list[str] = field(default_factory=list)
    sessions_interleaved: list[str] = field(default_factory=list)
    tool_calls: int = 0
    # Calls a tool worker started more than once (its log), with a tool worker killed
    # between two of the starts, or not (a duplicate delivery while the first was queued
    # or running: the sweep's re-send, or a job restored after the visibility timeout).
    started_again_after_kill: int = 0
    started_again_no_kill: int = 0
    redriven: Counter[str] = field(default_factory=Counter)  # the sweep's re-sends, by status
    reran_in_kernel: set[int] = field(default_factory=set)  # tokens whose cell ran twice
    rerun_committed: int = 0  # committed results printed by a cell's second run

    @property
    def duplicated(self) -> set[str]:
        return set(self.dup_transcript) | set(self.dup_memory)


def read_back(
    stack: LocalStack, accepted: dict[int, str], tasks: list[ChaosTask], pending: frozenset[str],
    tool_kills: list[float],
) -> Verdict:  # fmt: skip
    """Read every accepted task back (the gateway), its session's memory (Redis) and the
    tool worker's log, and sort what they show."""
    by_token = {task.token: task for task in tasks}
    ids = list(accepted.values())
    records = asyncio.run(_fetch_all(stack.gateway_url, stack.api_key, ids))
    verdict = Verdict(accepted=len(accepted))
    for token, task_id in accepted.items():
        _judge(verdict, by_token[token], task_id, records[task_id], pending)
    tenant = parse_api_keys(stack.api_keys)[stack.api_key]
    sessions: dict[str, dict[int, str]] = defaultdict(dict)
    for token, task_id in accepted.items():
        sessions[by_token[token].session_id][token] = task_id
    _check_memories(verdict, stack.master_url, tenant, sessions)  # after a failover: the new one
    _count_tool_runs(verdict, stack.log_path("tool_worker"), set(ids), tool_kills)
    verdict.redriven = Counter(
        entry["msg"].rpartition("(")[2].rstrip(")")
        for entry in _json_lines(stack.log_path("agent_worker"), "re-driving")
    )
    return verdict


async def _fetch_all(url: str, key: str, ids: list[str]) -> dict[str, dict[str, Any] | None]:
    limit = asyncio.Semaphore(16)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:

        async def one(task_id: str) -> dict[str, Any] | None:
            async with limit:
                resp = await http.get(f"/v1/tasks/{task_id}")
            if resp.status_code == 404:
                return None
            resp.raise_for_status()
            return resp.json()

        return dict(zip(ids, await asyncio.gather(*(one(i) for i in ids)), strict=True))


def _judge(
    verdict: Verdict, task: ChaosTask, task_id: str, record: dict[str, Any] | None,
    pending: frozenset[str],
) -> None:  # fmt: skip
    if record is None:
        verdict.lost["the task's hash is gone"].append(task_id)
        return
    status = record["status"]
    if task_id in pending or status not in _ENDED:
        verdict.stuck[status].append(task_id)
    elif status == "succeeded":
        right = task.expected in (record["result"] or "")
        (verdict.succeeded if right else verdict.wrong).append(task_id)
    else:
        verdict.lost[f"{status}: {record['error']}"].append(task_id)
    messages = [AgentMessage.model_validate(m) for m in record["messages"]]
    kinds = Counter(_kind(m) for m in messages)
    if any(count > 1 for count in kinds.values()):
        verdict.dup_transcript.append(task_id)
    for message in messages:
        _note_runs(verdict, message, task.token)


def _kind(message: AgentMessage) -> str:
    if message.sender == "user":
        return "user"
    if message.tool_call_id is not None:
        return "result"
    return "call" if message.tool_calls else "answer"


def _note_runs(verdict: Verdict, message: AgentMessage, token: int) -> None:
    """A tool result's `runs=` and `reran=[...]`: cells its kernel ran more than once."""
    if message.tool_call_id is None:
        return
    verdict.tool_calls += 1
    match = _RUNS.search(message.model_dump_json())
    if match is None:
        return
    if int(match.group(1)) > 1:
        verdict.rerun_committed += 1
        verdict.reran_in_kernel.add(token)
    verdict.reran_in_kernel.update(int(t) for t in match.group(2).split(",") if t.strip())


def _check_memories(
    verdict: Verdict, redis_url: str, tenant: str, sessions: dict[str, dict[int, str]]
) -> None:
    """Each session's memory: every task's messages at most once, a succeeded task's all
    there, and one task's messages together (tasks of a session run one at a time)."""
    client = redis.Redis.from_url(f"{redis_url}/0", decode_responses=True)
    try:
        for session_id, tasks in sorted(sessions.items()):
            raw = client.lrange(keys.session_memory(tenant, session_id), 0, -1)
            _check_memory(verdict, session_id, raw, tasks)
    finally:
        client.close()


def _check_memory(verdict: Verdict, session_id: str, raw: list[str], tasks: dict[int, str]) -> None:
    """`tasks`: the session's accepted tasks, task id by token."""
    counts: Counter[tuple[int, str]] = Counter()
    order: list[int] = []
    for item in raw:
        match = TOKEN.search(item)
        token = int(match.group(1)) if match else -1
        counts[token, _kind(AgentMessage.model_validate_json(item))] += 1
        if not order or order[-1] != token:
            order.append(token)
    if len(order) != len(set(order)):
        verdict.sessions_interleaved.append(session_id)
    for token in {token for token, _ in counts}:
        if max(counts[token, kind] for kind in _KINDS) > 1:
            verdict.dup_memory.append(tasks.get(token, f"unknown token {token}"))
    ended_well = set(verdict.succeeded) | set(verdict.wrong)
    for token, task_id in tasks.items():
        if task_id in ended_well and any(counts[token, kind] != 1 for kind in _KINDS):
            verdict.memory_incomplete.append(task_id)


def _count_tool_runs(verdict: Verdict, tool_log: Path, ids: set[str], kills: list[float]) -> None:
    """How many calls a tool worker started more than once (every start is logged), and
    whether a tool worker was killed between their first and last start."""
    starts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for entry in _json_lines(tool_log, _TOOL_CALL_LOG):
        if entry.get("task_id") in ids:
            starts[entry["task_id"], entry.get("call_id", "")].append(_unix(entry["ts"]))
    for times in starts.values():
        if len(times) < 2:
            continue
        if any(min(times) < kill < max(times) for kill in kills):
            verdict.started_again_after_kill += 1
        else:
            verdict.started_again_no_kill += 1


def _unix(ts: str | float) -> float:
    """A log line's time (ISO 8601, as `taskyard.plumbing.logs` writes it) in Unix seconds, as the
    kill times are."""
    return ts if isinstance(ts, float | int) else datetime.fromisoformat(ts).timestamp()


def _json_lines(log: Path, marker: str) -> list[dict[str, Any]]:
    """The service's JSON log entries (taskyard's own loggers) whose line holds `marker`."""
    lines = log.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{") and marker in line]
