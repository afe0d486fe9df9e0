import asyncio
import threading

import pytest

from taskyard.agentkit.actions import (
    ActionExecutor,
    ActionHook,
    AsyncActionExecutor,
    BaseAction,
    FinishAction,
    tool_api,
)
from taskyard.agentkit.hooks import Hook
from taskyard.agentkit.parsers import NativeToolCallParser
from taskyard.agentkit.schema import (
    ActionReturn,
    ActionStatusCode,
    ActionValidCode,
    AgentMessage,
    FunctionCall,
    LLMResponse,
    ToolCall,
)


class Clock(BaseAction):
    """Tell the time of a session."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def run(self, zone: str, session_id: str) -> str:
        """Tell the time.

        Args:
            zone: a time zone name
        """
        self.seen.append(session_id)
        return f"12:00 {zone}"


class Files(BaseAction):
    """A tiny toolkit."""

    @tool_api
    async def read(self, path: str) -> str:
        """Read a file."""
        await asyncio.sleep(0)
        return f"contents of {path}"

    @tool_api
    def fail(self) -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")


def executor(*hooks: ActionHook) -> AsyncActionExecutor:
    return AsyncActionExecutor([Clock(), Files(), FinishAction()], hooks)


def call(name: str, parameters: object = None, call_id: str | None = None) -> AgentMessage:
    content = {"name": name, "parameters": {} if parameters is None else parameters}
    if call_id is not None:
        content["id"] = call_id
    return AgentMessage(sender="assistant", content=content)


def ret_of(message: AgentMessage) -> ActionReturn:
    assert isinstance(message.content, ActionReturn)
    return message.content


async def test_a_call_returns_a_message_from_the_action_quoting_the_call_id() -> None:
    reply = await executor()(call("Clock", {"zone": "UTC"}, "call_1"), session_id="t:s")
    assert reply.sender == "Clock"
    assert reply.extra_info == {"tool_call_id": "call_1"}
    assert ret_of(reply).format_result() == "12:00 UTC"
    assert ret_of(reply).state == ActionStatusCode.SUCCESS


async def test_tool_call_objects_and_json_string_arguments_are_accepted() -> None:
    run = executor()
    reply = await run(ToolCall(id="c9", name="Files.read", parameters='{"path": "/a"}'), "s")
    assert (reply.sender, reply.extra_info) == ("Files", {"tool_call_id": "c9"})
    assert ret_of(reply).format_result() == "contents of /a"
    plain = await run(FunctionCall(name="Clock", parameters={"zone": "CET"}), "s")
    assert plain.extra_info is None and ret_of(plain).format_result() == "12:00 CET"


async def test_the_call_id_may_come_in_extra_info() -> None:
    message = AgentMessage(
        content={"name": "Clock", "parameters": {"zone": "UTC"}},
        extra_info={"tool_call_id": "x1"},
    )
    assert (await executor()(message, "s")).extra_info == {"tool_call_id": "x1"}


async def test_the_session_reaches_the_action() -> None:
    run = executor()
    await run(call("Clock", {"zone": "UTC"}), "tenant:a")
    await run(call("Clock", {"zone": "UTC"}), "tenant:b")
    assert run.actions["Clock"].seen == ["tenant:a", "tenant:b"]


@pytest.mark.parametrize(
    ("message", "state", "errmsg"),
    [
        (
            call("Weather", {"city": "Oslo"}, "c1"),
            ActionStatusCode.API_ERROR,
            "unknown tool 'Weather' (available: Clock, Files, FinishAction)",
        ),
        (
            call("Files.write", {"path": "/a"}, "c1"),
            ActionStatusCode.API_ERROR,
            "Files has no API 'write' (it has: Files.fail, Files.read)",
        ),
        (
            call("Files", {"path": "/a"}, "c1"),
            ActionStatusCode.API_ERROR,
            "Files is a toolkit: call one of Files.fail, Files.read",
        ),
        (
            call("Clock", {}, "c1"),
            ActionStatusCode.ARGS_ERROR,
            "bad arguments for Clock: missing required argument 'zone'",
        ),
        (
            call("Clock", '{"zone": ', "c1"),
            ActionStatusCode.ARGS_ERROR,
            "arguments are not valid JSON",
        ),
        (
            call("Clock", ["UTC"], "c1"),
            ActionStatusCode.ARGS_ERROR,
            "parameters must be a JSON object, got ['UTC']",
        ),
        (
            call("Files.fail", {}, "c1"),
            ActionStatusCode.API_ERROR,
            "Files.fail failed: RuntimeError: disk on fire",
        ),
    ],
    ids=[
        "unknown-tool",
        "unknown-api",
        "toolkit-without-api",
        "missing-arg",
        "bad-json",
        "not-an-object",
        "tool-raises",
    ],
)
async def test_failures_come_back_as_action_returns(
    message: AgentMessage, state: ActionStatusCode, errmsg: str
) -> None:
    reply = await executor()(message, "s")
    assert ret_of(reply).state == state
    assert errmsg in ret_of(reply).errmsg
    assert reply.extra_info == {"tool_call_id": "c1"}


@pytest.mark.parametrize(
    "content",
    ["run the clock please", {"parameters": {"zone": "UTC"}}, {"name": 3}, None, [1, 2]],
)
async def test_a_malformed_message_is_an_args_error_not_an_assertion(content: object) -> None:
    # Lagent asserts on these; the model should instead be told what a call looks like.
    reply = await executor()(AgentMessage(content=content), "s")
    assert reply.sender == "ActionExecutor"
    assert ret_of(reply).state == ActionStatusCode.ARGS_ERROR
    assert ret_of(reply).errmsg.startswith('no tool call to run: expected {"name": ...')


async def test_unknown_tools_are_marked_invalid_and_finish_is_marked_finish() -> None:
    unknown = await executor()(call("Nope"), "s")
    assert ret_of(unknown).valid == ActionValidCode.INVALID
    done = await executor()(call("FinishAction", {"response": "42"}), "s")
    assert ret_of(done).valid == ActionValidCode.FINISH
    assert ret_of(done).format_result() == "42"


class Recorder(ActionHook):
    def __init__(self, log: list[str], tag: str) -> None:
        self.log, self.tag = log, tag

    def before_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        self.log.append(f"{self.tag}:before:{session_id}")
        content = {**message.content, "parameters": {"zone": self.tag}}
        return message.model_copy(update={"content": content})

    def after_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        self.log.append(f"{self.tag}:after:{message.sender}")
        return message.model_copy(update={"receiver": self.tag})


async def test_hooks_run_in_order_and_may_rewrite_messages() -> None:
    log: list[str] = []
    reply = await executor(Recorder(log, "A"), Recorder(log, "B"))(call("Clock"), "s1")
    assert log == ["A:before:s1", "B:before:s1", "A:after:Clock", "B:after:Clock"]
    assert ret_of(reply).format_result() == "12:00 B"
    assert reply.receiver == "B"


async def test_a_hook_returning_none_keeps_the_message_and_a_broken_hook_is_reported() -> None:
    class Quiet(ActionHook):
        pass

    class Broken(ActionHook):
        def before_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
            raise ValueError("bad hook")

    reply = await executor(Quiet())(call("Clock", {"zone": "UTC"}, "c1"), "s")
    assert ret_of(reply).format_result() == "12:00 UTC"
    broken = await executor(Broken())(call("Clock", {"zone": "UTC"}, "c2"), "s")
    assert ret_of(broken).state == ActionStatusCode.API_ERROR
    assert "bad hook" in ret_of(broken).errmsg
    assert broken.extra_info == {"tool_call_id": "c2"}


def test_the_sync_executor_gives_the_same_replies() -> None:
    sync = ActionExecutor([Clock(), Files()])
    reply = sync(call("Files.read", {"path": "/b"}, "c3"), "s")
    assert ret_of(reply).format_result() == "contents of /b"
    assert reply.extra_info == {"tool_call_id": "c3"}
    assert ret_of(sync(call("Nope"), "s")).state == ActionStatusCode.API_ERROR
    assert [s["function"]["name"] for s in sync.tool_schemas()] == [
        "Clock",
        "Files.fail",
        "Files.read",
    ]


async def test_replies_survive_a_json_round_trip() -> None:
    reply = await executor()(call("Clock", {"zone": "UTC"}, "c1"), "s")
    again = AgentMessage.model_validate_json(reply.model_dump_json())
    assert again == reply


class WhichThread(BaseAction):
    """Report the thread the action ran on."""

    def run(self) -> int:
        return threading.get_ident()


def test_the_sync_executor_runs_blocking_actions_in_the_callers_thread() -> None:
    # A sandbox kernel started from a throwaway thread can die with that thread.
    reply = ActionExecutor([WhichThread()])(call("WhichThread"), "s")
    assert ret_of(reply).format_result() == str(threading.get_ident())


async def test_the_async_executor_keeps_its_loop_free_of_blocking_actions() -> None:
    reply = await AsyncActionExecutor([WhichThread()])(call("WhichThread"), "s")
    assert ret_of(reply).format_result() != str(threading.get_ident())


async def test_replies_about_a_known_tool_come_from_that_tool() -> None:
    reply = await executor()(call("Files.read", '{"path": ', "c1"), "s")
    assert (reply.sender, ret_of(reply).type) == ("Files", "Files.read")
    assert ret_of(reply).state == ActionStatusCode.ARGS_ERROR
    unknown = await executor()(call("Weather.today", {}, "c2"), "s")
    assert unknown.sender == "Weather.today"


async def test_a_native_call_with_broken_arguments_is_answered_under_its_id() -> None:
    response = LLMResponse(tool_calls=[ToolCall(id="c7", name="Clock", parameters="{zone: UTC}")])
    [raw] = NativeToolCallParser().parse_response(response)["tool_calls"]
    reply = await executor()(AgentMessage(content=raw), "s")
    assert reply.extra_info == {"tool_call_id": "c7"}
    assert ret_of(reply).state == ActionStatusCode.ARGS_ERROR
    assert ret_of(reply).errmsg.startswith("arguments are not valid JSON")


@pytest.mark.parametrize("make", [AsyncActionExecutor, ActionExecutor])
def test_hooks_of_the_wrong_kind_are_refused_when_registered(make: type) -> None:
    # They used to be accepted, and then every call failed with AttributeError.
    with pytest.raises(TypeError, match="an agent Hook goes to an agent's register_hook"):
        make([Clock()], hooks=[Hook()])
    with pytest.raises(TypeError, match="executors take ActionHook objects"):
        make([Clock()]).register_hook(object())


def test_register_hook_on_the_sync_executor_returns_a_removable_handle() -> None:
    log: list[str] = []
    sync = ActionExecutor([Clock()])
    handle = sync.register_hook(Recorder(log, "A"))
    assert ret_of(sync(call("Clock"), "s")).format_result() == "12:00 A"
    handle.remove()
    assert ret_of(sync(call("Clock", {"zone": "UTC"}), "s")).format_result() == "12:00 UTC"
    assert log == ["A:before:s", "A:after:Clock"]


class Returns(ActionHook):
    def __init__(self, value: object) -> None:
        self.value = value

    def before_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        return self.value

    def after_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        return self.value


@pytest.mark.parametrize("falsy", [None, False, [], ""])
async def test_a_falsy_hook_return_keeps_the_message(falsy: object) -> None:
    reply = await executor(Returns(falsy))(call("Clock", {"zone": "UTC"}), "s")
    assert ret_of(reply).format_result() == "12:00 UTC"


async def test_a_hook_returning_a_non_message_makes_an_error_reply_that_says_so() -> None:
    reply = await executor(Returns("text"))(call("Clock", {"zone": "UTC"}, "c1"), "s")
    assert ret_of(reply).state == ActionStatusCode.API_ERROR
    assert "before_action returns an AgentMessage, or a falsy value" in ret_of(reply).errmsg
    assert reply.extra_info == {"tool_call_id": "c1"}


class Stamp(ActionHook):
    async def after_action(self, executor, message, session_id):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        return message.model_copy(update={"receiver": "stamped"})


async def test_async_hook_methods_are_awaited() -> None:
    reply = await executor(Stamp())(call("Clock", {"zone": "UTC"}), "s")
    assert reply.receiver == "stamped"


def test_async_hook_methods_are_awaited_by_the_sync_executor_too() -> None:
    reply = ActionExecutor([Clock()], [Stamp()])(call("Clock", {"zone": "UTC"}))
    assert reply.receiver == "stamped"


async def test_tool_output_holding_a_lone_surrogate_can_still_be_stored() -> None:
    reply = await executor()(call("Clock", {"zone": "\ud800 \ud83d\ude00"}, "c1"), "s")
    assert ret_of(reply).format_result() == "12:00 \ufffd \U0001f600"
    assert AgentMessage.model_validate_json(reply.model_dump_json()) == reply
