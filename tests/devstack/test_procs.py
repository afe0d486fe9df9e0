"""The one process helper: children in their own session with a log, waited on until ready,
failing fast with their log when they die, stopped gracefully or killed by their own id."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from devstack.procs import ChildFailed, Processes, free_port


def _python(code: str) -> list[str]:
    return [sys.executable, "-u", "-c", code]


def test_a_child_that_dies_fails_the_wait_at_once_quoting_its_log(tmp_path: Path) -> None:
    with Processes(tmp_path) as procs:
        child = procs.start("doomed", _python("print('bad config'); raise SystemExit(3)"))
        began = time.monotonic()
        with pytest.raises(ChildFailed, match=r"doomed exited with 3:\nbad config"):
            child.wait_log("never printed", timeout_s=30)
        assert time.monotonic() - began < 10  # not the timeout


def test_the_announced_url_is_read_from_the_log(tmp_path: Path) -> None:
    code = "import time; print('warming up'); print('listening on http://127.0.0.1:4321')"
    with Processes(tmp_path) as procs:
        child = procs.start("server", _python(f"{code}; time.sleep(60)"))
        assert child.announced_url() == "http://127.0.0.1:4321"


def test_a_child_started_again_under_its_name_announces_its_own_url(tmp_path: Path) -> None:
    with Processes(tmp_path) as procs:
        procs.start("server", _python("print('listening on http://127.0.0.1:1111')")).wait()
        procs.stop("server")
        code = "import time; print('listening on http://127.0.0.1:2222'); time.sleep(60)"
        again = procs.start("server", _python(code))
        assert again.announced_url() == "http://127.0.0.1:2222"  # not the first run's line


def test_a_child_that_never_gets_ready_times_out(tmp_path: Path) -> None:
    with Processes(tmp_path) as procs:
        child = procs.start("quiet", _python("import time; time.sleep(60)"))
        with pytest.raises(ChildFailed, match="quiet: 'ready' logged not within 0 s"):
            child.wait_log("ready", timeout_s=0.3)


def test_stop_is_graceful_then_kills_the_whole_group(tmp_path: Path) -> None:
    # A child that ignores SIGTERM and has a grandchild of its own: both must go.
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        "print(g.pid, flush=True); time.sleep(60)"
    )
    procs = Processes(tmp_path)
    child = procs.start("stubborn", _python(code))
    child.wait_until(lambda: child.log_text().strip().isdigit(), "the grandchild's pid")
    grandchild = int(child.log_text())
    procs.stop("stubborn", timeout_s=0.5)
    assert child.popen.returncode == -9  # SIGTERM ignored, so SIGKILL
    assert "stubborn" not in procs.children
    deadline = time.monotonic() + 5  # SIGKILL is delivered, not awaited: let it land
    while _running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _running(grandchild)


def test_a_restart_appends_to_the_log_and_a_name_runs_once(tmp_path: Path) -> None:
    with Processes(tmp_path) as procs:
        procs.start("svc", _python("print('first')")).wait()
        with pytest.raises(ValueError, match="svc is started already"):
            procs.start("svc", _python("print('second')"))
        procs.stop("svc")
        procs.start("svc", _python("print('second')")).wait()
        assert procs.log_path("svc").read_text() == "first\nsecond\n"


def test_free_port_is_bindable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_free_port_never_hands_out_a_port_twice_nor_one_a_client_could_take() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)  # two services of one stack never share one
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert max(ports) < ephemeral  # no connection's source port, no program's port 0


def _running(pid: int) -> bool:
    # Once its parent died it is reparented; a zombie until reaped, but no longer running.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}
