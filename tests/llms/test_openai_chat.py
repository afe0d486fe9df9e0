"""OpenAIChat and AsyncOpenAIChat against a real local HTTP server: headers, any model name,
text or LLMResponse, streaming snapshots, tool-call assembly, and error translation."""

from __future__ import annotations

import json

import pytest
from fake_openai_server import FakeOpenAI, Reply

from taskyard.agentkit.llms import AsyncOpenAIChat, LLMError, OpenAIChat
from taskyard.agentkit.schema import LLMResponse, ToolCall

TOOLS = [{"type": "function", "function": {"name": "IPythonInterpreter", "parameters": {}}}]
HELLO = [{"role": "user", "content": "hi"}]


def sync_client(server: FakeOpenAI, model: str = "scripted", **kw: object) -> OpenAIChat:
    return OpenAIChat(base_url=server.base_url, model=model, max_retries=0, **kw)  # type: ignore[arg-type]


def async_client(server: FakeOpenAI, model: str = "scripted") -> AsyncOpenAIChat:
    return AsyncOpenAIChat(base_url=server.base_url, model=model, max_retries=0)


def test_chat_returns_text_and_sends_session_and_task_headers(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply(text="hello there"))
    llm = sync_client(fake_openai, temperature=0.5)
    assert llm.chat(HELLO, session_id=7, task_id="t-1") == "hello there"
    sent = fake_openai.requests[0]
    assert sent.headers["x-session-id"] == "7"
    assert sent.headers["x-task-id"] == "t-1"
    assert sent.body["messages"] == HELLO
    assert sent.body["temperature"] == 0.5
    assert "tools" not in sent.body


def test_any_model_name_is_accepted(fake_openai: FakeOpenAI) -> None:
    llm = sync_client(fake_openai, model="my-org/Qwen3-0.6B:finetune@v2")
    llm.chat(HELLO)
    assert fake_openai.requests[0].body["model"] == "my-org/Qwen3-0.6B:finetune@v2"


def test_chat_with_tools_returns_llm_response(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply(tool_calls=[("c1", "IPythonInterpreter", '{"command": "1+1"}')]))
    response = sync_client(fake_openai).chat(HELLO, tools=TOOLS)
    assert isinstance(response, LLMResponse)
    assert response.tool_calls == [
        ToolCall(id="c1", name="IPythonInterpreter", parameters='{"command": "1+1"}')
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage["total_tokens"] == 5
    assert fake_openai.requests[0].body["tools"] == TOOLS


def test_stream_yields_text_so_far_then_the_whole(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply(text="one two three"))
    snapshots = list(sync_client(fake_openai).stream_chat(HELLO, session_id="s"))
    assert snapshots == ["one", "one two", "one two three", "one two three"]
    sent = fake_openai.requests[0]
    assert sent.body["stream"] is True
    assert sent.headers["x-session-id"] == "s"


def test_stream_assembles_tool_calls_from_pieces(fake_openai: FakeOpenAI) -> None:
    args = json.dumps({"command": "print(1)"})
    fake_openai.script(Reply(text="ok", tool_calls=[("c1", "IPythonInterpreter", args)]))
    *_, last = sync_client(fake_openai).stream_chat(HELLO, tools=TOOLS)
    assert isinstance(last, LLMResponse)
    assert last.tool_calls == [ToolCall(id="c1", name="IPythonInterpreter", parameters=args)]
    assert last.finish_reason == "tool_calls"
    assert last.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_server_error_becomes_llm_error_with_status(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply(status=500), Reply(status=503))
    llm = sync_client(fake_openai)
    with pytest.raises(LLMError) as failure:
        llm.chat(HELLO)
    assert failure.value.status_code == 500
    with pytest.raises(LLMError):
        list(llm.stream_chat(HELLO))


async def test_async_chat_passes_session_id(fake_openai: FakeOpenAI) -> None:
    # Lagent's async client dropped session_id; here it reaches the server on every request.
    fake_openai.script(Reply(text="a"), Reply(text="b c"))
    llm = async_client(fake_openai, model="anything-goes")
    assert await llm.chat(HELLO, session_id=3) == "a"
    snapshots = [s async for s in llm.stream_chat(HELLO, session_id=4, task_id="t")]
    assert snapshots[-1] == "b c"
    await llm.close()
    assert [r.headers["x-session-id"] for r in fake_openai.requests] == ["3", "4"]
    assert fake_openai.requests[1].headers["x-task-id"] == "t"
    assert fake_openai.requests[0].body["model"] == "anything-goes"


async def test_async_tools_and_errors(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply(tool_calls=[("c9", "FinishAction", "{}")]), Reply(status=400))
    llm = async_client(fake_openai)
    response = await llm.chat(HELLO, tools=TOOLS)
    assert isinstance(response, LLMResponse)
    assert response.tool_calls[0].id == "c9"
    with pytest.raises(LLMError) as failure:
        await llm.chat(HELLO)
    assert failure.value.status_code == 400
    await llm.close()


def test_lone_surrogates_from_the_model_become_replacement_characters(
    fake_openai: FakeOpenAI,
) -> None:
    # orjson refuses them; a server may still send half of a character (escaped) in a chunk.
    fake_openai.script(Reply(text="a\ud800b"), Reply(text="c \udc00 d"))
    llm = sync_client(fake_openai)
    assert llm.chat(HELLO) == "a\ufffdb"
    assert list(llm.stream_chat(HELLO))[-1] == "c \ufffd d"


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_extra_headers_and_usage_per_call(fake_openai: FakeOpenAI) -> None:
    llm = sync_client(fake_openai, api_key="shared-key")
    seen: list[dict[str, int]] = []
    own = {"Authorization": "Bearer per-call"}
    assert llm.chat(HELLO, extra_headers=own, on_usage=seen.append) == "ok"  # text, and usage
    assert list(llm.stream_chat(HELLO, on_usage=seen.append))[-1] == "ok"
    assert seen == [USAGE, USAGE]
    auth = [r.headers["authorization"] for r in fake_openai.requests]
    assert auth == ["Bearer per-call", "Bearer shared-key"]


async def test_async_extra_headers_and_usage_per_call(fake_openai: FakeOpenAI) -> None:
    llm = async_client(fake_openai)
    seen: list[dict[str, int]] = []
    await llm.chat(HELLO, extra_headers={"Authorization": "Bearer t"}, on_usage=seen.append)
    [s async for s in llm.stream_chat(HELLO, on_usage=seen.append)]
    await llm.close()
    assert seen == [USAGE, USAGE]
    assert fake_openai.requests[0].headers["authorization"] == "Bearer t"


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_spent_rate_limit_comes_back_at_once_with_its_code_and_wait(
    fake_openai: FakeOpenAI, asynchronous: bool
) -> None:
    spent = Reply(status=429, code="rate_limit_exceeded", retry_after="1")
    fake_openai.script(spent, Reply(status=429, code="overloaded", retry_after="0"))
    kw = {"base_url": fake_openai.base_url, "model": "m", "max_retries": 2}
    with pytest.raises(LLMError) as failure:
        if asynchronous:
            llm = AsyncOpenAIChat(**kw)  # type: ignore[arg-type]
            await llm.chat(HELLO)
        else:
            OpenAIChat(**kw).chat(HELLO)  # type: ignore[arg-type]
    error = failure.value
    assert (error.code, error.retry_after, error.rate_limited) == ("rate_limit_exceeded", 1, True)
    assert len(fake_openai.requests) == 1  # waiting for a budget is the caller's decision
    if asynchronous:
        await llm.close()
    # A busy server's short Retry-After is waited for here, then the call succeeds.
    assert OpenAIChat(**kw).chat(HELLO) == "ok"  # type: ignore[arg-type]
    assert len(fake_openai.requests) == 3


def test_a_calls_generation_parameters_replace_the_clients_and_none_keeps_them(
    fake_openai: FakeOpenAI,
) -> None:
    llm = sync_client(fake_openai, temperature=0.5, max_tokens=9)
    llm.chat(HELLO, temperature=0.1, stop=["x"])
    llm.chat(HELLO, temperature=None, top_p=None)
    first, second = (sent.body for sent in fake_openai.requests)
    assert (first["temperature"], first["max_tokens"], first["stop"]) == (0.1, 9, ["x"])
    assert (second["temperature"], second["max_tokens"]) == (0.5, 9)
    assert "stop" not in second and "top_p" not in second
