"""The proxy's OpenAI surface, driven by the official SDK, in front of scripted replicas."""

from __future__ import annotations

import httpx
import openai
import pytest
from proxy_support import (
    API_KEY,
    ProxyFactory,
    ReplicaFactory,
    client_for,
    upstreams_of,
)

MESSAGES = [{"role": "user", "content": "say hello"}]


def test_chat_completion_round_trip(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(2)))
    reply = client_for(px).chat.completions.create(model="scripted", messages=MESSAGES)
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_chat_stream_passes_through_and_hides_unasked_usage(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)))
    chunks = list(
        client_for(px).chat.completions.create(model="scripted", messages=MESSAGES, stream=True)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    # The proxy asked the replica for usage; the client did not, so it must not see it.
    assert all(c.usage is None and c.choices for c in chunks)


def test_chat_stream_with_usage_when_asked(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    chunks = list(
        client_for(px).chat.completions.create(
            model="scripted", messages=MESSAGES, stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert chunks[-1].choices == []


def test_text_completions_stream_and_not(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    client = client_for(px)
    reply = client.completions.create(model="scripted", prompt="once upon a time")
    assert reply.choices[0].text
    streamed = list(client.completions.create(model="scripted", prompt="hello", stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices)


def test_models_is_the_union_of_the_pool(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    small = replicas(1, "--model", "small")
    big = replicas(1, "--model", "big")
    px = proxy(f"small={small[0].url},big={big[0].url}")
    names = {m.id for m in client_for(px).models.list()}
    assert names == {"small", "big"}


def test_wildcard_replica_lists_discovered_models(
    replicas: ReplicaFactory, proxy: ProxyFactory
) -> None:
    px = proxy(upstreams_of(replicas(1)))
    assert [m.id for m in client_for(px).models.list()] == ["scripted"]


def test_health_ready_and_metrics(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(2)))
    client_for(px).chat.completions.create(model="scripted", messages=MESSAGES)
    assert httpx.get(f"{px.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{px.url}/readyz").json()
    assert ready["healthy_replicas"] == 2
    metrics = httpx.get(f"{px.url}/metrics").text
    assert 'taskyard_proxy_requests_total{endpoint="chat",status="200"} 1' in metrics
    assert "taskyard_proxy_replica_in_flight" in metrics
    assert "taskyard_proxy_replica_healthy" in metrics
    assert 'taskyard_proxy_tokens_total{tenant="default",kind="completion"}' in metrics
    assert 'taskyard_proxy_request_seconds_count{endpoint="chat"} 1' in metrics


def test_wrong_key_is_refused(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    client = openai.OpenAI(base_url=px.base_url, api_key="not-" + API_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="scripted", messages=MESSAGES)
    assert info.value.body["code"] == "invalid_api_key"


def test_usage_header_on_whole_answers(replicas: ReplicaFactory, proxy: ProxyFactory) -> None:
    px = proxy(upstreams_of(replicas(1)))
    raw = client_for(px).chat.completions.with_raw_response.create(
        model="scripted", messages=MESSAGES
    )
    usage = raw.parse().usage
    assert usage is not None
    assert raw.headers["x-taskyard-usage"] == (
        f"prompt_tokens={usage.prompt_tokens}, completion_tokens={usage.completion_tokens}"
    )
