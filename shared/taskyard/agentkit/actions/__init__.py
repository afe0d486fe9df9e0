"""Actions (tools): typed classes the model calls, their registry, and the executors.

Importing this package registers the built-in actions: IPythonInterpreter, WebBrowser and
FinishAction. User actions register with `register_action` in a plugin module.
"""

from taskyard.agentkit.actions.api import ToolApi, tool_api
from taskyard.agentkit.actions.base import ActionError, ActionResources, BaseAction, text_result
from taskyard.agentkit.actions.cells import CellLog
from taskyard.agentkit.actions.executor import ActionExecutor, AsyncActionExecutor
from taskyard.agentkit.actions.finish import FinishAction
from taskyard.agentkit.actions.ipython import IPythonInterpreter
from taskyard.agentkit.actions.processors import ActionProcessor, InternLMActionProcessor
from taskyard.agentkit.actions.registry import (
    ACTIONS,
    action_queue,
    build_actions,
    openai_tool_schemas,
    register_action,
    session_bound,
    split_call_name,
    tool_names,
)
from taskyard.agentkit.actions.web import (
    AddressPolicy,
    MemoryResultStore,
    PageFetcher,
    RedisResultStore,
    ResultStore,
    SearchHit,
    SearxngClient,
    WebBrowser,
)
from taskyard.agentkit.hooks import ActionHook

__all__ = [
    "ACTIONS",
    "ActionError",
    "ActionExecutor",
    "ActionHook",
    "ActionProcessor",
    "ActionResources",
    "AddressPolicy",
    "AsyncActionExecutor",
    "BaseAction",
    "CellLog",
    "FinishAction",
    "IPythonInterpreter",
    "InternLMActionProcessor",
    "MemoryResultStore",
    "PageFetcher",
    "RedisResultStore",
    "ResultStore",
    "SearchHit",
    "SearxngClient",
    "ToolApi",
    "WebBrowser",
    "action_queue",
    "build_actions",
    "openai_tool_schemas",
    "register_action",
    "session_bound",
    "split_call_name",
    "text_result",
    "tool_api",
    "tool_names",
]
