"""``python3 -P -m kernel``: the sandbox's entry point."""

from .supervisor import main

main()
