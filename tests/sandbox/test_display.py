"""Rich outputs: what the kernel captures (display(), a cell's rich last value, matplotlib
figures shown or left open, DataFrames) within its caps, and what the worker takes of it:
nothing past the same caps, whatever the kernel sends."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from taskyard.sandbox.errors import KernelProtocolError
from taskyard.sandbox.kernel import DISPLAY_LIMIT, DISPLAY_MAX_OUTPUTS
from taskyard.sandbox.local.kernel_copy import KERNEL_SOURCE
from taskyard.sandbox.outputs import image_size, parse_display
from taskyard.sandbox.provider import KernelSandboxProvider
from taskyard.sandbox.session import KernelSandbox

TIMEOUT = 30.0


def png(width: int, height: int) -> bytes:
    """A real (tiny, grey) PNG of the given size."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))  # fmt: skip


IMAGE = f"""
class Image:
    def __init__(self, data): self.data = data
    def _repr_png_(self): return self.data
    def __repr__(self): return f'<Image of {{len(self.data)}} bytes>'
tiny = Image({png(3, 2)!r})
"""


class Kernel:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "kernel"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": str(KERNEL_SOURCE.parent)}, text=True,
        )  # fmt: skip
        self.ids = 0
        assert json.loads(self.process.stdout.readline()) == {"ready": True}  # type: ignore[union-attr]

    def run(self, code: str) -> dict[str, Any]:
        self.ids += 1
        request = json.dumps({"id": self.ids, "nonce": "n", "code": code})
        self.process.stdin.write(request + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return json.loads(self.process.stdout.readline())  # type: ignore[union-attr]


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    started = Kernel()
    assert started.run(IMAGE)["error"] is None
    yield started
    started.process.kill()
    started.process.wait()


def test_display_shows_rich_objects_and_prints_the_rest(kernel: Kernel) -> None:
    reply = kernel.run("display(tiny, 'plain', 42)")
    assert reply["stdout"] == "'plain'\n42\n"
    (output,) = reply["display"]
    assert output["mime"] == "image/png" and output["kind"] == "image"
    assert base64.b64decode(output["data"]) == png(3, 2)
    assert output["text"].startswith("<Image of ")


def test_a_rich_last_value_is_an_output_and_the_result(kernel: Kernel) -> None:
    code = "class Table:\n    def _repr_html_(self): return '<table></table>'\n" \
           "    def __repr__(self): return 'Table()'\nTable()"  # fmt: skip
    reply = kernel.run(code)
    assert reply["result"] == "Table()"
    assert reply["display"] == [
        {"mime": "text/html", "data": "<table></table>", "text": "Table()", "kind": "html"}
    ]


def test_the_first_form_an_object_has_wins_and_a_failing_one_is_said(kernel: Kernel) -> None:
    code = (
        "class Both:\n"
        "    def _repr_png_(self): raise ValueError('no png today')\n"
        "    def _repr_svg_(self): return ('<svg/>', {'isolated': True})\n"
        "    def _repr_html_(self): return '<b>html</b>'\n"
        "display(Both(), Both)"  # the class itself has no rich form: printed
    )
    reply = kernel.run(code)
    assert [o["mime"] for o in reply["display"]] == ["image/svg+xml"]
    assert reply["display"][0]["data"] == "<svg/>"
    assert "display: Both._repr_png_ failed: ValueError('no png today')" in reply["stderr"]
    assert "<class '__main__.Both'>" in reply["stdout"]


def test_a_cell_keeps_at_most_its_share_of_outputs(kernel: Kernel) -> None:
    reply = kernel.run(f"for _ in range({DISPLAY_MAX_OUTPUTS + 2}): display(tiny)")
    assert len(reply["display"]) == DISPLAY_MAX_OUTPUTS
    assert reply["stderr"].count("was left out") == 2
    big = kernel.run(f"display(Image(b'x' * {DISPLAY_LIMIT + 1}))")
    assert big["display"] == [] and "was left out" in big["stderr"]


def test_an_earlier_cells_thread_cannot_show_into_a_later_cell(kernel: Kernel) -> None:
    kernel.run("import threading, time\nstop = threading.Event()\n"
               "def spam():\n    while not stop.is_set(): display(tiny); time.sleep(0.01)\n"
               "threading.Thread(target=spam, daemon=True).start()")  # fmt: skip
    later = kernel.run("import time; time.sleep(0.2)\n1")
    kernel.run("stop.set()")
    assert later["display"] == [] and later["result"] == "1"


# -- matplotlib and pandas, in the sandbox image ----------------------------------------------


@pytest.fixture
def image_sandbox(make_docker_provider: Any) -> KernelSandbox:
    provider: KernelSandboxProvider = make_docker_provider()
    return provider.get("t:rich")


def test_shown_figures_are_pngs_and_are_closed(image_sandbox: KernelSandbox) -> None:
    ran = image_sandbox.run(
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()", TIMEOUT
    )
    assert ran.error is None, ran.error
    (figure,) = ran.display
    assert (figure.kind, figure.mime, figure.width, figure.height) == (
        "figure",
        "image/png",
        640,
        480,
    )
    assert figure.data.startswith(b"\x89PNG") and figure.text.startswith("<Figure size 640x480")
    assert image_sandbox.run("plt.get_fignums()", TIMEOUT).result == "[]"
    assert image_sandbox.run("1", TIMEOUT).display == []


def test_a_figure_left_open_is_shown_once_even_as_the_last_value(
    image_sandbox: KernelSandbox,
) -> None:
    ran = image_sandbox.run(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\n"
        "ax.bar(['a', 'b'], [1, 2])\nplt.figure()\nplt.plot([0, 1])\nfig", TIMEOUT
    )  # fmt: skip
    assert ran.error is None, ran.error
    sizes = [(o.width, o.height) for o in ran.display]
    assert sizes == [(400, 300), (640, 480)]  # the last value first, then the other open one
    assert ran.result == "<Figure size 400x300 with 1 Axes>"


def test_a_dataframe_is_a_table(image_sandbox: KernelSandbox) -> None:
    ran = image_sandbox.run(
        "import pandas as pd\npd.DataFrame({'x': [1, 2], 'y': [3, 4]})", TIMEOUT
    )
    (table,) = ran.display
    assert (table.kind, table.mime) == ("table", "text/html")
    assert b"<table" in table.data and table.text == ran.result
    assert ran.result is not None and "x  y" in ran.result


def test_a_figure_left_by_a_failing_cell_is_still_shown(image_sandbox: KernelSandbox) -> None:
    ran = image_sandbox.run("import matplotlib.pyplot as plt\nplt.plot([1])\n1 / 0", TIMEOUT)
    assert "ZeroDivisionError" in (ran.error or "")
    assert [o.kind for o in ran.display] == ["figure"]


def test_matplotlib_leaves_the_working_directory_alone(image_sandbox: KernelSandbox) -> None:
    image_sandbox.run("import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()", TIMEOUT)
    assert image_sandbox.list_files().files == []  # its config and cache live on /tmp


# -- what the worker takes of a reply ---------------------------------------------------------


def _output(mime: str = "image/png", data: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"mime": mime, "data": data or base64.b64encode(png(3, 2)).decode(), "text": "t",
            "kind": "image", **extra}  # fmt: skip


def test_the_worker_takes_well_formed_outputs() -> None:
    (image, table) = parse_display(
        [_output(kind="figure"), _output("text/html", "<p>", kind="table")]
    )
    assert (image.width, image.height, image.kind) == (3, 2, "figure")
    assert (table.kind, table.data) == ("table", b"<p>")


@pytest.mark.parametrize(
    "display",
    [
        "not a list",
        [_output()] * (DISPLAY_MAX_OUTPUTS + 1),
        [_output(data=base64.b64encode(b"x" * (DISPLAY_LIMIT + 1)).decode())],
        [_output("application/x-evil")],
        [_output(data="not base64!")],
        [{"mime": "text/html", "data": 7}],
        [_output(text="t" * 100_000)],
        [_output(text=["t"])],
        [_output(kind="bogus")],
        [_output(kind=["image"])],  # unhashable: once a TypeError out of the worker
    ],
    ids=[
        "shape",
        "count",
        "bytes",
        "type",
        "base64",
        "data",
        "text",
        "text type",
        "kind",
        "kind type",
    ],
)
def test_the_worker_refuses_outputs_past_the_caps(display: Any) -> None:
    with pytest.raises(KernelProtocolError):
        parse_display(display)


def test_image_sizes_come_from_the_images_own_header() -> None:
    assert image_size("image/png", png(640, 480)) == (640, 480)
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"JF" + b"\xff\xc0" + struct.pack(
        ">HBHH", 11, 8, 200, 300
    )  # fmt: skip
    assert image_size("image/jpeg", jpeg) == (300, 200)
    assert image_size("image/png", b"\x89PNG garbage") is None
    assert image_size("image/svg+xml", b"<svg/>") is None
