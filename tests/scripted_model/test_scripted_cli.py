"""`python -m services.scripted_model` as a process: port 0, the announced URL, --help."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def process() -> Iterator[subprocess.Popen[str]]:
    command = [sys.executable, "-m", "services.scripted_model", "--port", "0", "--model", "demo"]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    yield child
    child.terminate()
    child.wait(timeout=10)
    assert child.stdout is not None
    child.stdout.close()


def test_port_zero_announces_a_working_url(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line.startswith("listening on http://127.0.0.1:")
    url = line.removeprefix("listening on ")
    models = httpx.get(f"{url}/v1/models", timeout=10)
    assert models.headers["x-scripted-replica"] == url.rsplit(":", 1)[1]
    assert models.json()["data"][0]["id"] == "demo"


def test_help_lists_the_options() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "services.scripted_model", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    for option in ("--port", "--latency-ms", "--tokens-per-s", "--prefix-cache", "--model"):
        assert option in ran.stdout
