"""A cell writing its own reply frames on the executor's channel, on every backend: what leaves
the sandbox is still capped and checked, by the supervisor (which runs no user code), never by
the executor the cell runs in."""

from __future__ import annotations

import base64

import pytest

from taskyard.sandbox.kernel import DISPLAY_LIMIT, DISPLAY_MAX_OUTPUTS, MAX_TEXT_CHARS, OUTPUT_LIMIT
from taskyard.sandbox.provider import KernelSandboxProvider
from tests.sandbox.forge import forge_frame, forge_raw
from tests.sandbox.test_display import png

TIMEOUT = 30.0
TINY_PNG = base64.b64encode(png(3, 2)).decode()


def _image(data: str = repr(TINY_PNG)) -> str:
    """A rich output as a Python expression; `data` is one too."""
    return f"{{'mime': 'image/png', 'data': {data}, 'text': 'img', 'kind': 'image'}}"


def test_a_forged_12_mb_frame_comes_back_cut_to_the_cap(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:forged-size")
    sandbox.run("kept = 1", TIMEOUT)
    forged = "{'stdout': 'x' * (12 << 20), 'result': 'r' * (3 << 20), 'error': None}"
    result = sandbox.run(forge_frame(forged), TIMEOUT)
    assert not result.state_lost and result.error is None
    for text in (result.stdout, result.result or ""):
        assert OUTPUT_LIMIT <= len(text) <= MAX_TEXT_CHARS
        assert text.endswith("more characters not shown]\n")
    assert result.stdout.startswith("x" * 1000)
    # The cell's real reply came after the forged one: it is dropped, not taken for the next.
    assert sandbox.run("kept", TIMEOUT).result == "1"


def test_forged_rich_outputs_are_kept_within_their_caps(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:forged-display")
    forged = f"{{'stderr': 'e' * {MAX_TEXT_CHARS}, 'display': [{_image()}] * 100_000}}"
    many = sandbox.run(forge_frame(forged), TIMEOUT)
    assert len(many.display) == DISPLAY_MAX_OUTPUTS and not many.state_lost
    assert len(many.stderr) <= MAX_TEXT_CHARS  # cut, and the note still fits after it
    assert many.stderr.endswith(
        f"{100_000 - DISPLAY_MAX_OUTPUTS} rich outputs were left out: "
        "a cell returns at most 16 rich outputs and 2097152 bytes of them]\n"
    )
    big = "__import__('base64').b64encode(b'x' * (1536 << 10)).decode()"
    large = sandbox.run(forge_frame(f"{{'display': [{_image(big)}] * 3}}"), TIMEOUT)
    # Each is 1.5 MB: a second would pass the bytes a cell's rich outputs may hold.
    assert [len(o.data) for o in large.display] == [1536 << 10] and DISPLAY_LIMIT < 3 << 20
    assert "2 rich outputs were left out" in large.stderr


@pytest.mark.parametrize(
    ("forged", "why"),
    [
        ("{'stdout': 7}", "its stdout is not text"),
        ("{'error': ['a', 'list']}", "its error is not text"),
        ("{'display': 'not a list'}", "rich outputs that are not a list"),
        ("{'display': [{'mime': 'image/png', 'data': 'not base64!', 'text': '', 'kind': "
         "'image'}]}", "not base64"),
        ("{'display': [{'mime': 'image/png', 'data': '', 'text': '', 'kind': ['image']}]}",
         "no known type or kind"),
        ("{'display': [{'mime': 'application/x-evil', 'data': '', 'text': '', "
         "'kind': 'html'}]}", "no known type or kind"),
        ("b'{\"stdout\": ' + b'[' * 200_000 + b']' * 200_000 + b'}'", "RecursionError"),
        ("b'\\xff' * 64", "UnicodeDecodeError"),
    ],
    ids=["stdout type", "error type", "display shape", "base64", "kind type", "mime", "depth",
         "garbage"],
)  # fmt: skip
def test_a_forged_frame_of_the_wrong_shape_stops_the_kernel(
    provider: KernelSandboxProvider, forged: str, why: str
) -> None:
    sandbox = provider.get("t:forged-shape")
    sandbox.run("kept = 1", TIMEOUT)
    result = sandbox.run(forge_frame(forged), TIMEOUT)
    assert result.state_lost and result.result is None
    assert "malformed reply" in (result.error or "") and why in (result.error or "")
    after = sandbox.run("'kept' in globals()", TIMEOUT)
    assert after.result == "False" and not after.state_lost  # a fresh kernel, told once


def test_garbage_on_the_channel_stops_the_kernel(provider: KernelSandboxProvider) -> None:
    sandbox = provider.get("t:garbage")
    result = sandbox.run(forge_raw("b'\\xff\\xff\\xff\\xff' + b'garbage' * 100"), TIMEOUT)
    assert result.state_lost and "malformed reply" in (result.error or "")
