"""`OpenAIChat`, derived from the async core: the same methods, and over real HTTP (the
scripted model) it blocks where a user's script calls it: any thread, many threads at once
(one client), and a thread whose event loop is running."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from devstack.scripted_model import ScriptedModelThread
from taskyard.agentkit.llms import AsyncOpenAIChat, OpenAIChat
from taskyard.agentkit.llms.openai_chat import ChatCore

HELLO = [{"role": "user", "content": "hello there"}]
ECHO = "You said: hello there (scripted model)"


@pytest.fixture
def model() -> Iterator[ScriptedModelThread]:
    with ScriptedModelThread() as running:
        yield running


def test_the_blocking_client_has_every_method_of_the_core_with_its_signature() -> None:
    public = [name for name in vars(ChatCore) if not name.startswith("_")]
    assert public and [n for n in public if not hasattr(OpenAIChat, n)] == []
    for name in public:
        core, blocking = getattr(ChatCore, name), getattr(OpenAIChat, name)
        assert inspect.signature(blocking) == inspect.signature(core), name
        assert blocking.__doc__ == core.__doc__, name


def test_both_clients_take_the_same_arguments_but_their_transport() -> None:
    def arguments(cls: type, transport: str) -> list[inspect.Parameter]:
        parameters = inspect.signature(cls).parameters.values()
        return [p for p in parameters if p.name != transport]

    assert arguments(OpenAIChat, "client") == arguments(AsyncOpenAIChat, "session")


def test_chat_and_stream_answer_in_a_plain_thread(model: ScriptedModelThread) -> None:
    llm = OpenAIChat(model.base_url, "scripted", max_retries=0)
    assert llm.chat(HELLO, session_id="s") == ECHO
    snapshots = list(llm.stream_chat(HELLO, session_id="s"))
    assert snapshots[-1] == ECHO and len(snapshots) > 2
    llm.close()


def test_one_client_serves_many_threads_at_once(model: ScriptedModelThread) -> None:
    # Each call is held until all four wait together: they are in flight at once.
    httpx.post(f"http://127.0.0.1:{model.port}/scripted/config", json={"hold_until": 4})
    llm = OpenAIChat(model.base_url, "scripted", timeout=10.0, max_retries=0)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda s: llm.chat(HELLO, session_id=s), range(4)))
    assert answers == [ECHO] * 4
    llm.close()


async def test_it_blocks_inside_a_running_event_loop_too(model: ScriptedModelThread) -> None:
    # Its coroutines never suspend: it needs no loop and leaves the running one alone.
    one_connection = httpx.Client(limits=httpx.Limits(max_connections=1), timeout=5.0)
    llm = OpenAIChat(model.base_url, "scripted", max_retries=0, client=one_connection)
    assert llm.chat(HELLO) == ECHO
    stream = llm.stream_chat(HELLO)
    assert next(stream) == "You"
    stream.close()  # releases the answer: else the next call finds no free connection
    assert list(llm.stream_chat(HELLO))[-1] == ECHO
    llm.close()
