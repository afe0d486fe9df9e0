"""Structured answers: the model writes JSON, the parser validates it into pydantic models."""

from __future__ import annotations

import json
import re
import string
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from taskyard.agentkit.parsers.base import OutputParser, response_text
from taskyard.agentkit.schema import LLMResponse

__all__ = ["JSONParser", "ParseFailure"]

_COMMA = "\0"
_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL)


class ParseFailure(BaseModel):
    """A turn that did not parse: why, in words the model can act on, and the raw text."""

    error: str
    raw: str


class JSONParser(OutputParser):
    """Validates a JSON answer into the first of the named `formats` it fits.

    ``JSONParser(template, answer=Answer, unknown=Unknown)``: the template's ``{answer}`` and
    ``{unknown}`` become JSON skeletons of those models in `format_instruction`. JSON may sit in
    a ```json fence or among prose, and may carry ``//`` comment lines (as the skeletons do).
    Text that is not JSON, or JSON that fits no format, gives a `ParseFailure`.
    """

    def __init__(self, template: str = "", **formats: type[BaseModel]) -> None:
        if not formats:
            raise ValueError("JSONParser needs at least one format model")
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        if missing := fields - formats.keys():
            raise ValueError(f"template fields {sorted(missing)} name no format")
        self.template = template
        self.formats = formats

    def format_instruction(self) -> str | None:
        if not self.template:
            return None
        return self.template.format(**{k: skeleton(m) for k, m in self.formats.items()})

    def parse_response(self, response: str | LLMResponse) -> BaseModel | ParseFailure:
        text = response_text(response)
        try:
            data = json.loads(_json_part(text))
        except json.JSONDecodeError as exc:
            return ParseFailure(error=f"the answer is not valid JSON: {exc}", raw=text)
        reasons = []
        for name, model in self.formats.items():
            try:
                return model.model_validate(data)
            except ValidationError as exc:
                reasons.append(f"{name}: {_reasons(exc)}")
        error = "the JSON fits none of the formats (" + "; ".join(reasons) + ")"
        return ParseFailure(error=error, raw=text)


def skeleton(model: type[BaseModel], indent: int = 1) -> str:
    """A commented JSON outline of `model` for a prompt: field names, types, defaults."""
    pad = "    " * indent
    fields = [_field_lines(name, field, indent) for name, field in model.model_fields.items()]
    # Every field but the last takes a comma; the marker sits where the comma belongs.
    lines = [
        line.replace(_COMMA, "," if i < len(fields) - 1 else "")
        for i, block in enumerate(fields)
        for line in block
    ]
    return "{\n" + "\n".join(lines) + "\n" + pad[4:] + "}"


def _field_lines(name: str, field: FieldInfo, indent: int) -> list[str]:
    pad = "    " * indent
    lines = [f"{pad}// {field.description}"] if field.description else []
    nested = _nested_model(field.annotation)
    if nested is not None:
        return [*lines, f'{pad}"{name}": {skeleton(nested, indent + 1)}{_COMMA}']
    note = "required" if field.default is PydanticUndefined else f"default: {field.default!r}"
    return [*lines, f'{pad}"{name}": "{_type_name(field.annotation)}"{_COMMA}  // {note}']


def _json_part(text: str) -> str:
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    body = "\n".join(line for line in body.splitlines() if not line.strip().startswith("//"))
    start, end = body.find("{"), body.rfind("}")
    return body[start : end + 1] if 0 <= start < end else body


def _reasons(exc: ValidationError) -> str:
    return ", ".join(
        f"{'.'.join(map(str, err['loc'])) or 'value'}: {err['msg']}" for err in exc.errors()
    )


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *get_args(annotation)]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is not None:
        args = ", ".join(_type_name(arg) for arg in get_args(annotation))
        return f"{getattr(get_origin(annotation), '__name__', str(annotation))}[{args}]"
    return getattr(annotation, "__name__", str(annotation))
