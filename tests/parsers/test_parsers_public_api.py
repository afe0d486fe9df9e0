import pytest

import taskyard.agentkit.parsers
from taskyard.agentkit.parsers import OutputParser, response_text
from taskyard.agentkit.schema import LLMResponse


def test_public_names_resolve() -> None:
    for name in taskyard.agentkit.parsers.__all__:
        assert getattr(taskyard.agentkit.parsers, name) is not None
    assert {"NativeToolCallParser", "OutputParser", "JSONParser"} <= set(
        taskyard.agentkit.parsers.__all__
    )


def test_a_parser_must_implement_parse_response_and_may_skip_the_instruction() -> None:
    class Incomplete(OutputParser):
        pass

    class Upper(OutputParser):
        def parse_response(self, response: object) -> str:
            return response_text(response).upper()  # type: ignore[arg-type]

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]
    assert Upper().parse_response(LLMResponse(text="hi")) == "HI"
    assert Upper().format_instruction() is None
