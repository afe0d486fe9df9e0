"""Fixtures: a scripted model on a free loopback port, and OpenAI SDK clients for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import openai
import pytest

from devstack.scripted_model import ScriptedModelThread, ScriptedOptions


@pytest.fixture
def start_model() -> Iterator[Callable[..., ScriptedModelThread]]:
    """A factory: start a scripted model with the given options; all are stopped afterwards."""
    started: list[ScriptedModelThread] = []

    def start(**options: object) -> ScriptedModelThread:
        model = ScriptedModelThread(ScriptedOptions(**options)).start()  # type: ignore[arg-type]
        started.append(model)
        return model

    yield start
    for model in started:
        model.stop()


@pytest.fixture
def model(start_model: Callable[..., ScriptedModelThread]) -> ScriptedModelThread:
    return start_model()


@pytest.fixture
def client(model: ScriptedModelThread) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=model.base_url, api_key="unused", max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def control(model: ScriptedModelThread) -> Iterator[httpx.Client]:
    """Plain HTTP to the scripted model's root, for /scripted/* and /health."""
    with httpx.Client(base_url=f"http://127.0.0.1:{model.port}") as http:
        yield http
