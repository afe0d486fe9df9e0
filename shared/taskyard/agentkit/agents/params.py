"""The keywords an agent call accepts: those its `forward` declares, and no others.

``agent(message, session_id=1, temperature=0.2)`` checks every keyword against `forward`'s
signature before anything runs; an unknown one is a `TypeError` naming it (Lagent passed it on
into the model's request body). `forward` declares keywords as named parameters, or as
``**params: Unpack[SomeTypedDict]`` (the default `forward` takes `LLMParams` so); a bare
``**kwargs`` accepts any keyword, and checking it is then that `forward`'s job.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, Unpack, get_args, get_origin, get_type_hints, is_typeddict

__all__ = [
    "LLM_PARAMS",
    "Keywords",
    "LLMParams",
    "check_keywords",
    "common_keywords",
    "declared_keywords",
    "llm_params",
]

# The keywords a call accepts; None: any keyword.
Keywords = frozenset[str] | None


class LLMParams(TypedDict, total=False):
    """What the default `forward` passes on to the model client: the task id (the call's
    ``X-Task-ID``, for the proxy's logs and traces) and the per-call generation parameters
    `OpenAIChat` documents. None, or leaving one out, keeps the client's default."""

    task_id: str | None
    temperature: float | None
    max_tokens: int | None
    top_p: float | None
    stop: list[str] | None


LLM_PARAMS: frozenset[str] = frozenset(LLMParams.__optional_keys__)


@functools.cache
def declared_keywords(forward: Callable[..., Any]) -> Keywords:
    """The keywords `forward` (a function whose first parameter is the agent) declares."""
    accepted: set[str] = set()
    for parameter in list(inspect.signature(forward).parameters.values())[1:]:
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            accepted.add(parameter.name)
        elif parameter.kind is parameter.VAR_KEYWORD:
            unpacked = _unpacked_keys(forward, parameter.name)
            if unpacked is None:
                return None
            accepted |= unpacked
    return frozenset(accepted)


def common_keywords(sets: Iterable[Keywords]) -> Keywords:
    """The keywords every one of `sets` accepts (None, any keyword, when all accept any)."""
    common: Keywords = None
    for keywords in sets:
        if keywords is not None:
            common = keywords if common is None else common & keywords
    return common


def check_keywords(owner: str, given: Mapping[str, Any], accepted: Keywords) -> None:
    """`TypeError` naming the keywords of `given` that `accepted` does not hold."""
    if accepted is None:
        return
    unknown = sorted(given.keys() - accepted)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        others = ", ".join(sorted(accepted - {"session_id"})) or "nothing else"
        raise TypeError(
            f"{owner} got an unexpected keyword argument {names} "
            f"(it accepts session_id and {others})"
        )


def llm_params(owner: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `LLMParams` to send: checked (a direct `forward` call skips the call's check), and
    without the ones set to None."""
    check_keywords(owner, params, LLM_PARAMS)
    return {name: value for name, value in params.items() if value is not None}


def _unpacked_keys(forward: Callable[..., Any], name: str) -> frozenset[str] | None:
    try:
        hint = get_type_hints(forward).get(name)
    except Exception:  # an annotation that cannot be resolved here: treat **kwargs as open
        return None
    if get_origin(hint) is Unpack and is_typeddict(get_args(hint)[0]):
        fields = get_args(hint)[0]
        return frozenset(fields.__required_keys__ | fields.__optional_keys__)
    return None
