import shared.agentkit.actions


def test_public_names_resolve() -> None:
    for name in shared.agentkit.actions.__all__:
        assert getattr(shared.agentkit.actions, name) is not None
    assert {"openai_tool_schemas", "ActionExecutor", "AsyncActionExecutor", "BaseAction"} <= set(
        shared.agentkit.actions.__all__
    )
