"""The script over real HTTP with the official OpenAI SDK: echo, streams, the demo tool flow."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import openai

from devstack.scripted_model import ScriptedModelThread
from devstack.scripted_model.script import chat_turn

DEMO_QUESTION = "What is the square root of 2, to 12 decimal places? Use Python."
CODE_TOOL_SPEC = {
    "type": "function",
    "function": {
        "name": "IPythonInterpreter",
        "description": "Run Python code in a persistent interpreter.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def _run_python(source: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=30, check=False
    )


def test_plain_chat_echoes_and_says_it_is_scripted(
    client: openai.OpenAI, model: ScriptedModelThread
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="any-model-name",
        messages=[{"role": "user", "content": "hello there"}],
        extra_headers={"X-Session-ID": "s-1"},
    )
    completion = raw.parse()
    assert raw.headers["x-scripted-replica"] == str(model.port)
    assert completion.model == "any-model-name"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content == "You said: hello there (scripted model)"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 3  # "user:", "hello", "there"
    assert completion.usage.completion_tokens == 6


def test_stream_matches_non_stream_and_reports_usage(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "stream me please"}]
    whole = client.chat.completions.create(model="m", messages=messages)
    chunks = list(
        client.chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage == whole.usage


def test_stream_without_include_usage_sends_no_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


def test_demo_question_calls_the_tool_then_quotes_its_output(client: openai.OpenAI) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": DEMO_QUESTION}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[CODE_TOOL_SPEC])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "IPythonInterpreter"
    command = json.loads(call.function.arguments)["command"]
    ran = _run_python(command)
    assert ran.stdout.strip() == "1.414213562373"

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": ran.stdout},
    ]
    final = client.chat.completions.create(model="m", messages=messages, tools=[CODE_TOOL_SPEC])
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "The result is: 1.414213562373 (scripted model)"


def test_tool_call_ids_are_unique(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "2 + 3"}]
    ids = {
        client.chat.completions.create(model="m", messages=messages, tools=[CODE_TOOL_SPEC])
        .choices[0]
        .message.tool_calls[0]
        .id
        for _ in range(3)
    }
    assert len(ids) == 3


def test_streamed_tool_call_assembles_to_the_same_arguments(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": DEMO_QUESTION}]
    whole = client.chat.completions.create(model="m", messages=messages, tools=[CODE_TOOL_SPEC])
    stream = client.chat.completions.create(
        model="m", messages=messages, tools=[CODE_TOOL_SPEC], stream=True
    )
    deltas = [c.choices[0] for c in stream]
    pieces = [d.delta.tool_calls[0] for d in deltas if d.delta.tool_calls]
    assert pieces[0].id and pieces[0].function.name == "IPythonInterpreter"
    arguments = "".join(p.function.arguments or "" for p in pieces)
    assert arguments == whole.choices[0].message.tool_calls[0].function.arguments
    assert deltas[-1].finish_reason == "tool_calls"


def test_tool_error_is_reported_as_an_error(client: openai.OpenAI) -> None:
    failure = 'Traceback (most recent call last):\nNameError: name "x" is not defined'
    messages = [
        {"role": "user", "content": "print(x)"},
        {"role": "tool", "tool_call_id": "call_1", "content": failure},
    ]
    answer = client.chat.completions.create(model="m", messages=messages, tools=[CODE_TOOL_SPEC])
    text = answer.choices[0].message.content
    assert text.startswith("The tool reported an error: Traceback")
    assert "NameError" in text


def test_fenced_python_block_is_run_verbatim(client: openai.OpenAI) -> None:
    source = "total = sum(range(10))\nprint(total)\n"
    question = f"Please run this:\n```python\n{source}```"
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], tools=[CODE_TOOL_SPEC]
    )
    arguments = json.loads(answer.choices[0].message.tool_calls[0].function.arguments)
    assert arguments == {"command": source}


def test_without_the_code_tool_the_model_answers_in_text(client: openai.OpenAI) -> None:
    other_tool = {"type": "function", "function": {"name": "WebSearch", "parameters": {}}}
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": DEMO_QUESTION}], tools=[other_tool]
    )
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content.endswith("(scripted model)")


def test_tool_choice_none_gets_a_text_answer(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": DEMO_QUESTION}],
        tools=[CODE_TOOL_SPEC],
        tool_choice="none",
    )
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.content.startswith("You said: What is the square root")


def test_legacy_completions_stream_and_not(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="m", prompt="one two")
    assert whole.choices[0].text == "You said: one two (scripted model)"
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(model="m", prompt="one two", stream=True)
    )
    assert streamed == whole.choices[0].text


def test_models_and_health_say_scripted(client: openai.OpenAI, control: httpx.Client) -> None:
    models = client.models.list().data
    assert [(m.id, m.owned_by) for m in models] == [("scripted", "taskyard-scripted")]
    assert control.get("/health").json() == {"status": "ok", "scripted": True}


def test_bad_requests_get_openai_style_errors(control: httpx.Client) -> None:
    not_json = control.post("/v1/chat/completions", content=b"{nope")
    assert not_json.status_code == 400
    assert "not JSON" in not_json.json()["error"]["message"]
    assert control.post("/v1/chat/completions", json={"messages": []}).status_code == 400
    assert control.get("/v1/chat/completions").status_code == 405
    assert control.get("/v2/nothing").json()["error"]["code"] == 404


def test_a_system_prompt_asking_to_count_gets_the_messages_counted() -> None:
    system = {"role": "system", "content": "Be brief. Count the messages you see."}
    turns = [
        system,
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "two"},
    ]
    assert chat_turn(turns, None).text == "[3 messages] You said: two (scripted model)"
    assert chat_turn(turns[1:], None).text == "You said: two (scripted model)"  # not asked
