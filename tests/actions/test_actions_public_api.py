import shared.actions


def test_public_names_resolve() -> None:
    for name in shared.actions.__all__:
        assert getattr(shared.actions, name) is not None
    assert {"openai_tool_schemas", "ActionExecutor", "AsyncActionExecutor", "BaseAction"} <= set(
        shared.actions.__all__
    )
