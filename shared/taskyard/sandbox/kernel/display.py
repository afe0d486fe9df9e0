"""Rich outputs of a cell, as Jupyter's display_data: what ``display(obj)`` shows, a cell's
last value when it has a rich form, and matplotlib figures shown (``plt.show()``) or left open
when the cell ends (then closed, as Jupyter's inline backend does).

An object shows as the first form it has, in DISPLAY_MIMES order: a matplotlib figure as PNG
(rendered by Agg), else its ``_repr_png_``, ``_repr_jpeg_``, ``_repr_svg_`` or ``_repr_html_``
(a pandas DataFrame's table). Each output also carries the object's repr, the text the model
reads. An object with no rich form is printed. A cell keeps at most DISPLAY_MAX_OUTPUTS
outputs and DISPLAY_LIMIT bytes of them; its stderr says what was left out.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import sys
import tempfile
from collections.abc import Callable
from operator import methodcaller
from typing import Any

from . import BINARY_MIMES, DISPLAY_LIMIT, DISPLAY_MAX_OUTPUTS, DISPLAY_TEXT_LIMIT

__all__ = ["CellOutputs", "Publisher", "prepare_matplotlib", "setup_matplotlib", "show_figures"]

_METHODS = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
)
_KINDS = {"image/png": "image", "image/jpeg": "image", "image/svg+xml": "image",
          "text/html": "html"}  # fmt: skip


class CellOutputs:
    """One cell's rich outputs, within the cell's budget; `note` writes to its stderr."""

    def __init__(self, note: Callable[[str], Any]) -> None:
        self.items: list[dict[str, Any]] = []
        self.shown: set[int] = set()  # figures already shown in this cell, by id
        self.note = note
        self._bytes = 0

    def add(self, mime: str, data: bytes | str, text: str, kind: str) -> None:
        size = len(data) if isinstance(data, bytes) else len(data.encode(errors="replace"))
        if len(self.items) >= DISPLAY_MAX_OUTPUTS or self._bytes + size > DISPLAY_LIMIT:
            self.note(
                f"[a rich output ({kind}, {size} bytes) was left out: a cell returns at most "
                f"{DISPLAY_MAX_OUTPUTS} rich outputs and {DISPLAY_LIMIT} bytes of them]\n"
            )
            return
        self._bytes += size
        # A binary form comes as bytes (`_rich_form` keeps no other).
        wire = (
            base64.b64encode(data).decode()
            if isinstance(data, bytes) and mime in BINARY_MIMES
            else data
        )
        self.items.append({"mime": mime, "data": wire, "text": text, "kind": kind})


class Publisher:
    """`display`, a cell's last value, and its figures, as outputs of the running cell.

    `current` gives the running cell's outputs, or None when the caller is not the cell (a
    thread an earlier cell left running): then nothing is shown, as its prints are dropped.
    """

    def __init__(self, current: Callable[[], CellOutputs | None]) -> None:
        self._current = current

    def display(self, *objects: Any) -> None:
        """Show each object as a rich output of the cell, or print it if it has no rich form."""
        for obj in objects:
            if not self.show_value(obj):
                print(_text(obj))

    def show_value(self, obj: Any) -> bool:
        """Show `obj` if it has a rich form; whether it had one."""
        outputs = self._current()
        if outputs is None or obj is None:
            return False
        form = _rich_form(obj, outputs)
        if form is None:
            return False
        mime, data, kind = form
        if kind == "figure":
            outputs.shown.add(id(obj))
        outputs.add(mime, data, _text(obj), kind)
        return True

    def show_figures(self) -> None:
        """Show the open matplotlib figures not shown yet in this cell, then close them all."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        outputs = self._current()
        if pyplot is None or outputs is None:
            return
        for number in pyplot.get_fignums():
            figure = pyplot.figure(number)
            if id(figure) not in outputs.shown:
                self.show_value(figure)
        pyplot.close("all")

    @staticmethod
    def close_figures() -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close("all")


_publisher: Publisher | None = None


def install(publisher: Publisher) -> None:
    """Make `publisher` the one `show_figures` (the matplotlib backend's show) reaches."""
    global _publisher
    _publisher = publisher


def show_figures() -> None:
    if _publisher is not None:
        _publisher.show_figures()


def setup_matplotlib() -> None:
    """Before any cell: matplotlib renders with this kernel's backend (Agg, and `show` makes
    outputs), keeping its configuration on /tmp, the sandbox's writable tmpfs. The font list
    the image made at build time (TASKYARD_MPL_CACHE) is copied there, so a first import does
    not scan the fonts. In a fork server's session, `prepare_matplotlib` ran before the fork:
    what is left are a few system calls (each Python function run here would write to pages
    the session otherwise shares)."""
    config, copies = prepare_matplotlib()
    try:
        os.mkdir(config, 0o700)
    except FileExistsError:  # a /tmp shared with others: a directory of our own, then
        config = tempfile.mkdtemp(prefix="matplotlib-")
        os.environ["MPLCONFIGDIR"] = config
        copies = tuple((src, os.path.join(config, os.path.basename(dst))) for src, dst in copies)
    for source, target in copies:
        _copy(source, target)


@functools.cache
def prepare_matplotlib() -> tuple[str, tuple[tuple[str, str], ...]]:
    """Set matplotlib's backend and configuration directory in the environment; that
    directory, and the font lists to copy into it as (source, target) (none if the image made
    none: matplotlib then makes one at its first import, if a cell ever imports it)."""
    config = os.path.join(tempfile.gettempdir(), "matplotlib")
    os.environ["MPLBACKEND"] = f"module://{__package__}.mpl_backend"
    os.environ["MPLCONFIGDIR"] = config
    cache = os.environ.get("TASKYARD_MPL_CACHE")
    names = sorted(os.listdir(cache)) if cache and os.path.isdir(cache) else []
    return config, tuple(
        (os.path.join(cache, name), os.path.join(config, name))
        for name in names
        if cache and name.startswith("fontlist-") and name.endswith(".json")
    )


def _copy(source: str, target: str) -> None:
    """Copy a file by its descriptors alone (no buffer, no Python-level loop over it)."""
    src = os.open(source, os.O_RDONLY)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            size = os.fstat(src).st_size
            while size > 0 and (sent := os.sendfile(dst, src, None, size)) > 0:
                size -= sent
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _rich_form(obj: Any, outputs: CellOutputs) -> tuple[str, bytes | str, str] | None:
    """(mime, data, kind) of the first rich form `obj` has, or None."""
    figure = _figure_class()
    if figure is not None and isinstance(obj, figure):
        png = _call(outputs, obj, "savefig", _render_png)
        return None if png is None else ("image/png", png, "figure")
    if isinstance(obj, type):
        return None  # a class: its _repr_*_ are functions of its instances
    for mime, method in _METHODS:
        data = _call(outputs, obj, method, methodcaller(method))
        if isinstance(data, tuple) and data:
            data = data[0]  # IPython's (data, metadata)
        if mime in BINARY_MIMES and isinstance(data, bytes) and data:
            return mime, data, _kind(obj, mime)
        if mime not in BINARY_MIMES and isinstance(data, str) and data:
            return mime, data, _kind(obj, mime)
    return None


def _figure_class() -> type | None:
    figures = sys.modules.get("matplotlib.figure")
    return getattr(figures, "Figure", None) if figures is not None else None


def _render_png(figure: Any) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _call(outputs: CellOutputs, obj: Any, name: str, render: Callable[[Any], Any]) -> Any:
    """`render(obj)`, or None when the object has no such method or it fails (said on the
    cell's stderr, as Jupyter shows a formatter's error)."""
    try:
        if not callable(getattr(obj, name, None)):
            return None
        return render(obj)
    except Exception as exc:
        outputs.note(f"display: {type(obj).__name__}.{name} failed: {exc!r}\n")
        return None


def _kind(obj: Any, mime: str) -> str:
    if mime == "text/html" and type(obj).__module__.split(".")[0] == "pandas":
        return "table"
    return _KINDS[mime]


def _text(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception as exc:
        text = f"<{type(obj).__name__} object: repr failed: {exc!r}>"
    if len(text) <= DISPLAY_TEXT_LIMIT:
        return text
    return text[:DISPLAY_TEXT_LIMIT] + f"\n[... {len(text) - DISPLAY_TEXT_LIMIT} more characters]"
