"""One tool call. Interim body until shared.actions lands (issue 3)."""

from __future__ import annotations

from shared.sandbox import ExecutionResult, SandboxProvider
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage, ToolCall
from shared.settings import Settings

__all__ = ["run_tool_call"]


def run_tool_call(
    call: ToolCall, *, session_key: str, sandboxes: SandboxProvider, settings: Settings
) -> AgentMessage:
    """Run the call in the session's sandbox; errors come back in the ActionReturn."""
    args = call.parameters if isinstance(call.parameters, dict) else {}
    if call.name != "IPythonInterpreter" or "command" not in args:
        ret = ActionReturn(
            type=call.name,
            args=args,
            state=ActionStatusCode.ARGS_ERROR,
            errmsg=f"unknown tool {call.name!r} or missing 'command'",
        )
    else:
        res = sandboxes.get(session_key).run(args["command"], settings.sandbox_timeout_s)
        ret = _to_return(call, res)
    return AgentMessage(sender=call.name, content=ret, extra_info={"tool_call_id": call.id})


def _to_return(call: ToolCall, res: ExecutionResult) -> ActionReturn:
    text = "".join(filter(None, [res.stdout, res.stderr, res.result]))
    if res.error:
        return ActionReturn(
            type=call.name,
            args=call.parameters,
            errmsg=res.error,
            result=[{"type": "text", "content": text}],
            state=ActionStatusCode.API_ERROR,
        )
    return ActionReturn(
        type=call.name, args=call.parameters, result=[{"type": "text", "content": text}]
    )
