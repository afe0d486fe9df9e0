"""The scripted model's web program: search, open the first result, quote the page."""

from __future__ import annotations

import json
from typing import Any

from devstack.scripted_model.browsing import first_result_url, quote_page, search_query
from devstack.scripted_model.script import chat_turn

_BROWSER = [
    {"type": "function", "function": {"name": f"WebBrowser.{api}"}}
    for api in ("search", "select", "open")
]
_CODE = [{"type": "function", "function": {"name": "IPythonInterpreter"}}]
_QUESTION = "Search the web for redis streams and quote the first result."
_RESULTS = (
    "[0] Redis docs\nhttp://127.0.0.1:8/docs/redis\nAbout redis.\n\n"
    "[1] Celery docs\nhttp://127.0.0.1:8/docs/celery\nAbout celery."
)
_PAGE = "http://127.0.0.1:8/docs/redis\n\nRedis Streams\n\nXADD   appends\nan entry."


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}]}  # fmt: skip


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _conversation(*turns: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": _QUESTION}, *turns]


def test_asked_to_search_it_calls_the_search() -> None:
    turn = chat_turn(_conversation(), _BROWSER + _CODE)
    assert turn.tool_call is not None and turn.tool_call.name == "WebBrowser.search"
    assert json.loads(turn.tool_call.arguments) == {"query": "redis streams"}


def test_given_results_it_opens_the_first() -> None:
    search = _call("c1", "WebBrowser.search", {"query": "redis streams"})
    turn = chat_turn(_conversation(search, _result("c1", _RESULTS)), _BROWSER)
    assert turn.tool_call is not None and turn.tool_call.name == "WebBrowser.open"
    assert json.loads(turn.tool_call.arguments) == {"url": "http://127.0.0.1:8/docs/redis"}


def test_given_the_page_it_quotes_it_and_says_it_is_scripted() -> None:
    search = _call("c1", "WebBrowser.search", {"query": "redis streams"})
    opened = _call("c2", "WebBrowser.open", {"url": "http://127.0.0.1:8/docs/redis"})
    turns = _conversation(search, _result("c1", _RESULTS), opened, _result("c2", _PAGE))
    assert chat_turn(turns, _BROWSER).text == (
        'http://127.0.0.1:8/docs/redis says: "Redis Streams XADD appends an entry." '
        "(scripted model)"
    )


def test_a_page_that_could_not_be_opened_is_reported() -> None:
    opened = _call("c2", "WebBrowser.open", {"url": "http://10.0.0.1/"})
    refusal = "refused to connect: 10.0.0.1 is a private address; only public addresses are opened"
    turn = chat_turn(_conversation(opened, _result("c2", refusal)), _BROWSER)
    assert turn.text == f"The tool reported an error: {refusal} (scripted model)"


def test_no_results_are_quoted_as_they_are() -> None:
    search = _call("c1", "WebBrowser.search", {"query": "redis streams"})
    turn = chat_turn(_conversation(search, _result("c1", "No results for 'x'.")), _BROWSER)
    assert turn.text == "The result is: No results for 'x'. (scripted model)"


def test_without_the_browser_on_offer_the_question_goes_to_python_or_is_echoed() -> None:
    code = chat_turn(_conversation(), _CODE)
    assert code.tool_call is not None and code.tool_call.name == "IPythonInterpreter"
    assert chat_turn(_conversation(), None).text.startswith("You said: Search the web for")


def test_the_program_reads_the_browser_s_text() -> None:
    assert search_query("please search the web for Celery beat, then answer") == "Celery beat"
    assert search_query("Search the web for redis streams") == "redis streams"
    assert search_query("what is 2 + 2?") is None
    assert first_result_url(_RESULTS) == "http://127.0.0.1:8/docs/redis"
    assert first_result_url("[0] \nhttps://example.org/a b\n") == "https://example.org/a"
    assert first_result_url("No results for 'x'.") is None
    assert quote_page("http://x/\n\n" + "word " * 100).endswith('word"')
    assert len(quote_page("http://x/\n\n" + "word " * 100)) < 330
