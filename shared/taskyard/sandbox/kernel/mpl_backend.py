"""matplotlib's backend inside the kernel (``MPLBACKEND=module://kernel.mpl_backend``): Agg
renders, and ``plt.show()`` makes the open figures rich outputs of the running cell, as
Jupyter's inline backend does. Imported by matplotlib, never by the kernel itself."""

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

from .display import show_figures

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args: object, **kwargs: object) -> None:
    show_figures()
