"""Every benchmark imports: a module moved in `shared/` breaks `make bench` only when it runs,
long after the move; this finds it in `make test`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

# The benchmarks run as `python bench/<name>.py`: their own directory first on the path.
_IMPORT_ALL = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_benchmark_module_imports() -> None:
    names = sorted(path.stem for path in BENCH.glob("*.py"))
    assert "sandbox_burst_bench" in names
    done = subprocess.run([sys.executable, "-c", _IMPORT_ALL, *names], cwd=BENCH,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
