"""Running code on a host of devstack/hosts.py, for the tests of the hosts themselves
(devstack/test_hosts.py) and of the stack on them (e2e/test_several_hosts.py)."""

from __future__ import annotations

import subprocess
import sys

from devstack.hosts import Host


def run_on(host: Host, code: str) -> str:
    """Run Python `code` on `host`; what it printed."""
    argv = host.argv([sys.executable, "-c", code])
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
