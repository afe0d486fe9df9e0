import pytest
from pydantic import BaseModel, Field

from taskyard.agentkit.parsers import JSONParser, ParseFailure


class Person(BaseModel):
    name: list[str] = Field(description="Names of the person")
    age: int


class Unknown(BaseModel):
    reason: str
    confidence: float = 0.5


def parser(template: str = "") -> JSONParser:
    return JSONParser(template, person=Person, unknown=Unknown)


def test_json_is_validated_into_the_first_model_it_fits() -> None:
    assert parser().parse_response('{"name": ["Ada"], "age": 36}') == Person(name=["Ada"], age=36)
    assert parser().parse_response('{"reason": "no idea"}') == Unknown(reason="no idea")


def test_json_in_a_fence_with_comments_and_prose() -> None:
    text = 'Here:\n```json\n{\n  // who\n  "name": ["Ada"],\n  "age": 36\n}\n```\nbye'
    assert parser().parse_response(text) == Person(name=["Ada"], age=36)
    assert parser().parse_response('Sure! {"reason": "x"} Hope it helps') == Unknown(reason="x")


def test_json_fitting_no_model_is_a_parse_failure_not_a_crash() -> None:
    # Lagent raises UnboundLocalError here; the model should instead read what was wrong.
    text = '{"title": "Dune", "year": 1965}'
    failure = parser().parse_response(text)
    assert isinstance(failure, ParseFailure)
    assert failure.raw == text
    assert "fits none of the formats" in failure.error
    assert "person: name: Field required" in failure.error
    assert "unknown: reason: Field required" in failure.error


def test_text_that_is_not_json_is_a_parse_failure() -> None:
    failure = parser().parse_response("I don't know")
    assert isinstance(failure, ParseFailure)
    assert failure.error.startswith("the answer is not valid JSON")
    assert failure.raw == "I don't know"


def test_instruction_shows_each_model_as_a_commented_skeleton() -> None:
    text = parser("Answer like\n{person}\nor\n{unknown}").format_instruction()
    assert text == (
        "Answer like\n{\n"
        "    // Names of the person\n"
        '    "name": "list[str]",  // required\n'
        '    "age": "int"  // required\n'
        "}\nor\n{\n"
        '    "reason": "str",  // required\n'
        '    "confidence": "float"  // default: 0.5\n'
        "}"
    )
    assert parser().format_instruction() is None


def test_template_must_name_known_formats() -> None:
    with pytest.raises(ValueError, match="other"):
        JSONParser("{other}", person=Person)
    with pytest.raises(ValueError, match="at least one"):
        JSONParser("")
