"""Name this checkout in the venv's site-packages (a .pth file), so the venv imports services/
and devstack/ from it: the taskyard package installs neither (the image, compose and the local
stack run them from the checkout), and `taskyard up`'s command lives in devstack."""

from __future__ import annotations

import sysconfig
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PTH_NAME = "taskyard-checkout.pth"


def main() -> None:
    Path(sysconfig.get_path("purelib"), PTH_NAME).write_text(f"{CHECKOUT}\n")


if __name__ == "__main__":
    main()
