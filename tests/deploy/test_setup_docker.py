"""scripts/setup_docker.sh registers gVisor's runsc with the engine idempotently: on a fresh
machine (before dockerd starts), on a machine whose dockerd already runs (a reload, once), and
never failing the set-up where runsc is missing or cannot be registered.

The engine here is a stand-in (the machine's own must not be reloaded or restarted by a
test): a `dockerd` process that reads its configuration file at start and on SIGHUP, and the
`docker`, `pgrep` and `runsc` commands the script calls, on a PATH of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/setup_docker.sh"
TOOLS = ("bash", "grep", "seq", "sleep", "nohup", "cat", "env")

# The stand-in engine: its runtimes are those of its configuration file as last read.
DOCKERD = """
import json, os, signal, sys, time
state = os.environ["STAND_IN"]
config = os.environ["DOCKER_DAEMON_JSON"]  # its default path, as /etc/docker/daemon.json is
if "--config-file" in sys.argv:
    config = sys.argv[sys.argv.index("--config-file") + 1]
def load(*_):
    runtimes = {"runc": {}}
    if os.path.exists(config):
        runtimes.update(json.load(open(config)).get("runtimes", {}))
    json.dump(runtimes, open(state + "/runtimes.tmp", "w"))
    os.replace(state + "/runtimes.tmp", state + "/runtimes")
def hup(*_):
    open(state + "/events", "a").write("SIGHUP\\n")
    load()
load()
signal.signal(signal.SIGHUP, hup)
open(state + "/dockerd.pid", "w").write(str(os.getpid()))
while True:
    time.sleep(1)
"""
# `docker info [--format ...]`: answers while the stand-in runs (or "remote" says it runs
# elsewhere).
DOCKER = """
import json, os, sys
state = os.environ["STAND_IN"]
def running():
    try:
        os.kill(int(open(state + "/dockerd.pid").read()), 0)
        return os.path.exists(state + "/runtimes")
    except (OSError, ValueError):
        return False
if sys.argv[1] != "info" or not (running() or os.path.exists(state + "/remote")):
    sys.exit(1)
if "--format" in sys.argv:
    print(open(state + "/runtimes").read() if running() else '{"runc": {}}')
"""
# `pgrep -x[o] dockerd`: the stand-in's pid, never the machine's own dockerd.
PGREP = """
import os, sys
try:
    pid = int(open(os.environ["STAND_IN"] + "/dockerd.pid").read())
    os.kill(pid, 0)
except (OSError, ValueError):
    sys.exit(1)
print(pid)
"""
# `runsc install --config_file F --runtime NAME -- ARGS...`, as runsc does it: the runtime
# added to F's JSON, F's directory made if missing; it fails on a file that is not JSON.
RUNSC = """
import json, os, sys
state = os.environ["STAND_IN"]
open(state + "/events", "a").write(" ".join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
path, name = args[args.index("--config_file") + 1], args[args.index("--runtime") + 1]
config = json.load(open(path)) if os.path.exists(path) else {}
config.setdefault("runtimes", {})[name] = {
    "path": "/usr/bin/runsc", "runtimeArgs": args[args.index("--") + 1:]}
os.makedirs(os.path.dirname(path), exist_ok=True)
json.dump(config, open(path, "w"), indent=4)
"""


@dataclass
class Machine:
    """A PATH of stand-ins and the state they share."""

    root: Path

    @property
    def daemon_json(self) -> Path:
        return self.root / "etc/docker/daemon.json"

    def command(self, name: str, code: str) -> None:
        path = self.root / "bin" / name
        path.write_text(f"#!{sys.executable}\n{code}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def start_dockerd(self) -> None:
        """A dockerd already running, started as the machine's own was."""
        args = ["dockerd"]
        if self.daemon_json.exists():
            args += ["--config-file", str(self.daemon_json)]
        subprocess.Popen(args, env=self.env(), start_new_session=True)
        for _ in range(600):
            if (self.root / "state/runtimes").exists():
                return
            time.sleep(0.05)
        raise AssertionError("the stand-in dockerd did not start")

    def env(self) -> dict[str, str]:
        return {
            "PATH": str(self.root / "bin"),
            "STAND_IN": str(self.root / "state"),
            "DOCKER_DAEMON_JSON": str(self.daemon_json),
            "DOCKERD_LOG": str(self.root / "dockerd.log"),
            "DOCKER_WAIT_S": "30",
        }

    def setup(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT)], env=self.env(), capture_output=True, text=True, timeout=60
        )

    def engine_runtimes(self) -> dict[str, object]:
        loaded: dict[str, object] = json.loads((self.root / "state/runtimes").read_text())
        return loaded

    def events(self) -> list[str]:
        path = self.root / "state/events"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # never started, or gone
            os.kill(int((self.root / "state/dockerd.pid").read_text()), signal.SIGKILL)


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    """runsc installed, dockerd installed and not running, nothing registered."""
    for folder in ("bin", "state"):
        (tmp_path / folder).mkdir()
    for tool in TOOLS:
        found = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (tmp_path / "bin" / tool).symlink_to(found.stdout.strip())
    made = Machine(tmp_path)
    for name, code in {
        "dockerd": DOCKERD,
        "docker": DOCKER,
        "pgrep": PGREP,
        "runsc": RUNSC,
    }.items():
        made.command(name, code)
    yield made
    made.stop()


RUNSC_ENTRY = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}
INSTALL = "install --config_file {} --runtime runsc -- --network=none"


def test_a_fresh_machine_registers_runsc_before_the_engine_starts(machine: Machine) -> None:
    first = machine.setup()
    assert first.returncode == 0, first.stderr
    assert "registering gVisor's runsc" in first.stderr and "docker is up" in first.stderr
    assert json.loads(machine.daemon_json.read_text()) == {"runtimes": {"runsc": RUNSC_ENTRY}}
    assert machine.engine_runtimes() == {"runc": {}, "runsc": RUNSC_ENTRY}
    assert machine.events() == [INSTALL.format(machine.daemon_json)]  # no reload needed
    again = machine.setup()
    assert (again.returncode, again.stderr) == (0, "")  # once set up, a no-op
    assert machine.events() == [INSTALL.format(machine.daemon_json)]


def test_a_running_engine_takes_runsc_with_one_reload_and_keeps_its_settings(
    machine: Machine,
) -> None:
    machine.daemon_json.parent.mkdir(parents=True)
    machine.daemon_json.write_text('{"log-level": "warn"}')
    machine.start_dockerd()
    first = machine.setup()
    assert first.returncode == 0, first.stderr
    assert "reloading dockerd's configuration for runsc" in first.stderr
    registered = json.loads(machine.daemon_json.read_text())
    assert registered == {"log-level": "warn", "runtimes": {"runsc": RUNSC_ENTRY}}
    assert machine.engine_runtimes() == {"runc": {}, "runsc": RUNSC_ENTRY}
    assert machine.events() == [INSTALL.format(machine.daemon_json), "SIGHUP"]
    again = machine.setup()
    assert (again.returncode, again.stderr) == (0, "")
    assert machine.events() == [INSTALL.format(machine.daemon_json), "SIGHUP"]


def test_registered_but_not_yet_taken_only_reloads(machine: Machine) -> None:
    machine.start_dockerd()  # started before an earlier run registered runsc
    machine.daemon_json.parent.mkdir(parents=True)
    machine.daemon_json.write_text(json.dumps({"runtimes": {"runsc": RUNSC_ENTRY}}))
    done = machine.setup()
    assert done.returncode == 0, done.stderr
    assert machine.events() == ["SIGHUP"]
    assert "runsc" in machine.engine_runtimes()


def test_without_runsc_the_engine_is_set_up_as_before(machine: Machine) -> None:
    (machine.root / "bin/runsc").unlink()
    machine.start_dockerd()
    done = machine.setup()
    assert (done.returncode, done.stderr) == (0, "")
    assert not machine.daemon_json.exists() and machine.engine_runtimes() == {"runc": {}}


def test_a_registration_that_fails_does_not_fail_the_set_up(machine: Machine) -> None:
    machine.start_dockerd()
    machine.command("runsc", "import sys\nsys.exit('Install failed: unexpected end of JSON input')")
    done = machine.setup()
    assert done.returncode == 0, done.stderr
    assert "could not register runsc" in done.stderr and "sandboxes keep runc" in done.stderr
    assert machine.engine_runtimes() == {"runc": {}} and machine.events() == []


def test_an_engine_that_runs_elsewhere_is_not_signalled(machine: Machine) -> None:
    (machine.root / "state/remote").touch()  # `docker info` answers; no dockerd runs here
    done = machine.setup()
    assert done.returncode == 0, done.stderr
    assert "no dockerd runs here to reload it" in done.stderr
    assert machine.events() == [INSTALL.format(machine.daemon_json)]
