"""Reading request bodies: validation, the usage option, the routing key."""

from __future__ import annotations

import orjson
import pytest

from services.llm_proxy.errors import BadRequest
from services.llm_proxy.http.payload import parse_request, prompt_prefix, with_model

SYSTEM = "You are a careful agent. " * 20


def _body(**fields: object) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


def test_a_stream_without_usage_gets_it_asked_for() -> None:
    parsed = parse_request(_body(stream=True), True, None, 256)
    assert parsed.stream and not parsed.client_wants_usage
    assert orjson.loads(parsed.body)["stream_options"] == {"include_usage": True}


def test_a_stream_with_other_options_keeps_them() -> None:
    body = _body(stream=True, stream_options={"include_usage": False, "x": 1})
    parsed = parse_request(body, True, None, 256)
    assert orjson.loads(parsed.body)["stream_options"] == {"include_usage": True, "x": 1}
    assert not parsed.client_wants_usage


def test_a_client_asking_for_usage_is_left_alone() -> None:
    body = _body(stream=True, stream_options={"include_usage": True})
    parsed = parse_request(body, True, None, 256)
    assert parsed.body == body and parsed.client_wants_usage


def test_whole_answers_are_forwarded_unchanged() -> None:
    body = _body()
    parsed = parse_request(body, True, None, 256)
    assert parsed.body == body and not parsed.stream


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"nope",
        b"[1]",
        b'{"messages": []}',
        b'{"model": 3, "messages": [{}]}',
        b'{"model": "m"}',
        b'{"model": "m", "messages": ["text"]}',
    ],
)
def test_bad_chat_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_request(body, True, None, 256)


def test_text_completions_need_a_prompt() -> None:
    with pytest.raises(BadRequest):
        parse_request(b'{"model": "m"}', False, None, 256)
    assert parse_request(b'{"model": "m", "prompt": "p"}', False, None, 256).model == "m"


def test_the_session_decides_the_key_when_present() -> None:
    a = parse_request(_body(), True, b"session-1", 256)
    b = parse_request(
        _body(messages=[{"role": "user", "content": "other"}]), True, b"session-1", 256
    )
    assert a.route_key == b.route_key


def test_a_shared_system_prompt_gives_a_shared_key() -> None:
    def key(user: str) -> int | None:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        return parse_request(_body(messages=messages), True, None, 256).route_key

    assert key("first question") == key("second question")
    other = [{"role": "system", "content": "Different." * 40}, {"role": "user", "content": "x"}]
    assert parse_request(_body(messages=other), True, None, 256).route_key != key("x")


def test_the_prefix_is_bounded() -> None:
    data = {"messages": [{"role": "user", "content": "a" * 1000}]}
    assert len(prompt_prefix(data, True, 100)) == 100


def test_a_fallback_body_names_the_fallback_model() -> None:
    parsed = parse_request(_body(), True, None, 256)
    assert orjson.loads(with_model(parsed, "small"))["model"] == "small"
