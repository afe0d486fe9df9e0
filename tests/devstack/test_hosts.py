"""Several hosts on one machine (devstack/hosts.py): hosts reach one another by address only,
each with its own /tmp and hostname; a removed host takes its processes and address with it;
everything a run made goes on exit, even after a failure; a crashed run's leftovers go with
the next run, while a live run's stay."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hosts_support import run_on

from devstack.hosts import PREFIX, RANGE, STATE_DIR, HostNetwork
from devstack.procs import ROOT, Processes


def _fetch(address: str, port: int) -> str:
    """Python code printing the status of GET http://address:port/, or the error's name."""
    return (
        "import urllib.request\ntry:\n"
        f"    print(urllib.request.urlopen('http://{address}:{port}/', timeout=2).status)\n"
        "except OSError as e:\n    print(type(getattr(e, 'reason', e)).__name__)\n"
    )


def _made(tag: str) -> list[str]:
    """The namespaces, links and record of run `tag` that exist."""
    names = [ns["name"] for ns in _ip_json("netns", "list")]
    names += [link["ifname"] for link in _ip_json("link", "show")]
    mine = [name for name in names if name.startswith(PREFIX + tag)]
    return mine + [p.name for p in STATE_DIR.glob(f"{tag}.json")]


def _ip_json(*args: str) -> list[dict[str, str]]:
    text = subprocess.run(["ip", "-j", *args], capture_output=True, text=True).stdout.strip()
    return list(json.loads(text)) if text else []


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not), within 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_hosts_reach_each_other_by_address_with_their_own_tmp(tmp_path: Path) -> None:
    with HostNetwork(["web", "client_1"]) as network, Processes(tmp_path) as procs:
        web, client = network["web"], network["client_1"]
        assert ipaddress.ip_address(web.address) in RANGE and web.address != client.address
        server = [sys.executable, "-m", "http.server", "--bind", web.address, "8080"]
        procs.start("web", web.argv(server)).wait_http(f"http://{web.address}:8080/")
        assert run_on(client, _fetch(web.address, 8080)) == "200\n"
        assert run_on(client, _fetch("127.0.0.1", 8080)) == "ConnectionRefusedError\n"
        # /tmp (its TMPDIR) and the hostname are the host's, for every process on it.
        run_on(web, "import tempfile; open(tempfile.gettempdir() + '/mine', 'w').close()")
        # Of the machine's /tmp, a host sees only what its services run from, if it lies there.
        ran_from = _under_tmp(ROOT, Path(sys.prefix))
        listing = "import os, socket; print(sorted(os.listdir('/tmp')), socket.gethostname())"
        assert run_on(web, listing) == f"{sorted(['mine', *ran_from])} web\n"
        assert run_on(client, listing) == f"{ran_from} client-1\n"
        assert not Path("/tmp/mine").exists()


def test_a_removed_host_takes_its_processes_and_address(tmp_path: Path) -> None:
    with HostNetwork(["gone", "left"]) as network, Processes(tmp_path) as procs:
        gone, left = network["gone"], network["left"]
        server = [sys.executable, "-m", "http.server", "--bind", gone.address, "8080"]
        child = procs.start("server", gone.argv(server))
        child.wait_http(f"http://{gone.address}:8080/")
        network.remove("gone")
        assert child.wait(10) == -signal.SIGKILL
        assert (
            gone.netns not in subprocess.run(["ip", "netns"], capture_output=True).stdout.decode()
        )
        assert run_on(left, _fetch(gone.address, 8080)) in {"TimeoutError\n", "OSError\n"}


def test_everything_goes_on_exit_even_after_a_failure() -> None:
    with pytest.raises(RuntimeError, match="mid-run"), HostNetwork(["a", "b"]) as network:
        tag = network.tag
        assert len(_made(tag)) == 2 + 3 + 1  # namespaces; the bridge, a veth end each; record
        raise RuntimeError("mid-run")
    assert _made(tag) == []


def test_a_crashed_runs_leftovers_go_with_the_next_run_and_a_live_runs_stay() -> None:
    crashed = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_RUN], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert crashed.stdout is not None
    made = json.loads(crashed.stdout.readline())
    os.kill(crashed.pid, signal.SIGKILL)  # its finally never runs
    crashed.wait()
    assert len(_made(made["tag"])) == 2 + 3 + 1
    with HostNetwork(["live"]) as live, HostNetwork(["next"]) as following:
        assert _made(made["tag"]) == []
        assert not _running(made["sleeper"])  # the process on its host, killed
        assert len(_made(live.tag)) == 1 + 2 + 1  # a live run's stay
        assert live.machine_address != following.machine_address  # each its own /24
    assert _made(live.tag) == _made(following.tag) == []


# A run that makes two hosts, starts a process on one and waits to be killed.
_CRASHING_RUN = """
import json, subprocess, sys, time
from devstack.hosts import HostNetwork
network = HostNetwork(["x", "y"]).__enter__()
sleeper = subprocess.Popen(network["x"].argv(["sleep", "600"]), start_new_session=True)
time.sleep(0.2)
print(json.dumps({"tag": network.tag, "sleeper": sleeper.pid}), flush=True)
time.sleep(600)
"""


def test_names_a_host_cannot_have_are_refused_before_anything_is_made() -> None:
    for names in (["a", "a"], ["Bad"], [], ["x" * 33]):
        with pytest.raises(ValueError, match="host names"):
            HostNetwork(names)


def _under_tmp(*paths: Path) -> list[str]:
    """The names in /tmp of those of `paths` that lie under it (a CI checkout, say)."""
    return sorted({p.resolve().parts[2] for p in paths if p.resolve().is_relative_to("/tmp")})
