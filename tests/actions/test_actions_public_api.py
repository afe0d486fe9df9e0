import taskyard.agentkit.actions


def test_public_names_resolve() -> None:
    for name in taskyard.agentkit.actions.__all__:
        assert getattr(taskyard.agentkit.actions, name) is not None
    assert {"openai_tool_schemas", "ActionExecutor", "AsyncActionExecutor", "BaseAction"} <= set(
        taskyard.agentkit.actions.__all__
    )
