"""The exec rule: a command run in a worker's own sandbox, never privileged, and only as the
sandbox's user."""

from __future__ import annotations

from services.engine_proxy.bodies import Wire, is_zero, parse_model
from services.engine_proxy.errors import Refused

__all__ = ["check_exec", "check_exec_start"]


class ExecCreate(Wire):
    Container: str | None = None  # sent by the Docker SDK; the engine acts on the path's
    Cmd: list[str] | None = None
    User: str | None = None
    Privileged: bool | None = None
    Env: list[str] | None = None
    WorkingDir: str | None = None
    Tty: bool | None = None
    AttachStdin: bool | None = None
    AttachStdout: bool | None = None
    AttachStderr: bool | None = None
    DetachKeys: str | None = None
    ConsoleSize: list[int] | None = None


class ExecStart(Wire):
    Detach: bool | None = None
    Tty: bool | None = None
    ConsoleSize: list[int] | None = None


def check_exec(body: bytes, user: str) -> None:
    """Refuse an exec that is privileged, runs as another user than `user` (unset: the
    container's, which the create rule made `user`), or sets a field it does not need."""
    create = parse_model(ExecCreate, body, "exec")
    problems = _unset(create)
    if create.Privileged:
        problems.append("an exec may not be privileged")
    if create.User not in (None, "", user):
        problems.append(f"an exec runs as {user!r}, the sandbox's user (not {create.User!r})")
    if problems:
        raise Refused("; ".join(problems))


def check_exec_start(body: bytes) -> None:
    problems = _unset(parse_model(ExecStart, body, "exec start"))
    if problems:
        raise Refused("; ".join(problems))


def _unset(model: Wire) -> list[str]:
    extras = model.extras().items()
    return [f"{name} is not allowed" for name, value in extras if not is_zero(value)]
