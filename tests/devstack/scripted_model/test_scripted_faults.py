"""Run-time behaviour changes through `POST /scripted/config`: errors, cut streams, latency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from waiting import wait_until


def _chat(client: openai.OpenAI, **kwargs: object) -> object:
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "one two three"}], **kwargs
    )


def test_config_reports_the_options_it_set(control: httpx.Client) -> None:
    answer = control.post("/scripted/config", json={"latency_ms": 5, "fail_after_chunks": 2})
    assert answer.status_code == 200
    assert answer.json() == {
        "latency_ms": 5.0,
        "tokens_per_s": 0.0,
        "fail_status": None,
        "fail_after_chunks": 2,
        "hold_until": None,
    }


@pytest.mark.parametrize(
    "body",
    [{"latency_ms": -1}, {"fail_status": 200}, {"fail_status": "503"}, {"colour": "red"}, [1]],
)
def test_config_refuses_bad_values(control: httpx.Client, body: object) -> None:
    answer = control.post("/scripted/config", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"]


def test_fail_status_answers_an_openai_error_until_cleared(
    client: openai.OpenAI, control: httpx.Client
) -> None:
    control.post("/scripted/config", json={"fail_status": 503})
    with pytest.raises(openai.InternalServerError) as failure:
        _chat(client)
    assert failure.value.status_code == 503
    assert "scripted failure" in failure.value.message
    control.post("/scripted/config", json={"fail_status": 429})
    with pytest.raises(openai.RateLimitError):
        _chat(client, stream=True)
    control.post("/scripted/config", json={"fail_status": None})
    assert _chat(client).choices[0].finish_reason == "stop"


@pytest.mark.parametrize("tokens_per_s", [0, 1000])
def test_fail_after_chunks_cuts_the_stream_and_the_connection(
    client: openai.OpenAI, control: httpx.Client, tokens_per_s: int
) -> None:
    control.post("/scripted/config", json={"fail_after_chunks": 2, "tokens_per_s": tokens_per_s})
    received = []
    with pytest.raises(openai.APIError):
        for chunk in _chat(client, stream=True):
            received.append(chunk)
    assert len(received) == 2
    control.post("/scripted/config", json={"fail_after_chunks": None})
    assert sum(1 for _ in _chat(client, stream=True)) > 2


def test_latency_and_pacing_keep_the_answer_the_same(
    client: openai.OpenAI, control: httpx.Client
) -> None:
    fast = _chat(client).choices[0].message.content
    control.post("/scripted/config", json={"latency_ms": 20, "tokens_per_s": 500})
    slow_stream = "".join(c.choices[0].delta.content or "" for c in _chat(client, stream=True))
    assert _chat(client).choices[0].message.content == fast == slow_stream


def test_keep_alive_serves_many_requests_on_one_connection(control: httpx.Client) -> None:
    control.post("/scripted/config", json={"latency_ms": 1})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(5):
        assert control.post("/v1/chat/completions", json=body).status_code == 200
    assert control.get("/scripted/stats").json()["requests"] == 5


def test_held_calls_are_answered_together_once_the_batch_is_full(
    client: openai.OpenAI, control: httpx.Client
) -> None:
    control.post("/scripted/config", json={"hold_until": 3})
    with ThreadPoolExecutor(3) as pool:
        first = [pool.submit(_chat, client) for _ in range(2)]
        wait_until(
            lambda: control.get("/scripted/stats").json()["held"] == 2, "the held calls", timeout=30
        )
        assert not any(call.done() for call in first)  # two of three: still held
        last = pool.submit(_chat, client, stream=True)
        answers = [call.result(timeout=30) for call in [*first, last]]
    assert len(answers) == 3
    stats = control.get("/scripted/stats").json()
    assert (stats["held"], stats["peak_held"]) == (0, 3)


def test_switching_holding_off_lets_the_held_calls_go(
    client: openai.OpenAI, control: httpx.Client
) -> None:
    control.post("/scripted/config", json={"hold_until": 1000})
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(_chat, client)
        wait_until(
            lambda: control.get("/scripted/stats").json()["held"] == 1, "the held calls", timeout=30
        )
        control.post("/scripted/config", json={"hold_until": None})
        assert held.result(timeout=30).choices[0].finish_reason == "stop"
    assert control.get("/scripted/stats").json()["peak_held"] == 1
    assert control.post("/scripted/config", json={"hold_until": 0}).status_code == 400
