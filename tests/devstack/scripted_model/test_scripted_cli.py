"""`python -m devstack.scripted_model` as a process: port 0, the announced URL, --help."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]


def _start(*flags: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "devstack.scripted_model", "--port", "0", *flags]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def _stop(child: subprocess.Popen[str]) -> None:
    child.terminate()
    child.wait(timeout=10)
    assert child.stdout is not None
    child.stdout.close()


@pytest.fixture
def started() -> Iterator[Callable[..., str]]:
    """Start the CLI with flags; returns the announced line. Every child is stopped after."""
    children: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> str:
        child, line = _start(*flags)
        children.append(child)
        return line

    yield start
    for child in children:
        _stop(child)


def test_port_zero_announces_a_working_url(started: Callable[..., str]) -> None:
    line = started("--model", "demo")
    assert line.startswith("listening on http://127.0.0.1:")
    url = line.removeprefix("listening on ")
    models = httpx.get(f"{url}/v1/models", timeout=10)
    assert models.headers["x-scripted-replica"] == url.rsplit(":", 1)[1]
    assert models.json()["data"][0]["id"] == "demo"


def test_prefix_cache_flags_reach_the_cache(started: Callable[..., str]) -> None:
    url = started("--prefix-cache", "--block-tokens", "4", "--cache-blocks", "8").split()[-1]
    body = {"model": "m", "messages": [{"role": "user", "content": "a b c d e f g h i"}]}
    cached = [
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10).headers[
            "x-prefix-cached-tokens"
        ]
        for _ in range(2)
    ]
    assert cached == ["0", "8"]  # ten words ("user:" included): two full blocks of four
    stats = httpx.get(f"{url}/scripted/stats", timeout=10).json()
    assert stats["cached_blocks"] == 2


def test_help_lists_the_options() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "devstack.scripted_model", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    for option in ("--port", "--latency-ms", "--tokens-per-s", "--prefix-cache", "--model"):
        assert option in ran.stdout
