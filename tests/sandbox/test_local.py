"""The local backend: namespaces and rlimits, with a loud warning that it is weaker."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from shared.sandbox.errors import SandboxUnavailable
from shared.sandbox.local import LocalSandboxProvider, parse_size
from shared.sandbox.provider import KernelSandboxProvider
from shared.settings import Settings

ProviderFactory = Callable[..., KernelSandboxProvider]
TIMEOUT = 20.0


def test_warns_that_isolation_is_weaker(
    make_local_provider: ProviderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="shared.sandbox.local"):
        make_local_provider()
    assert any("WEAKER isolation" in r.getMessage() for r in caplog.records)


def test_bwrap_root_is_read_only_and_host_is_hidden(make_local_provider: ProviderFactory) -> None:
    code = (
        "import os\n"
        "for path in ('/usr/x', '/work/f', '/tmp/f'):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print(path, 'ok')\n"
        "    except OSError as e:\n"
        "        print(path, e.strerror)\n"
        "os.path.exists('/root'), os.path.exists('/etc/passwd'), os.getcwd()"
    )
    result = make_local_provider(launcher="bwrap").get("t:fs").run(code, TIMEOUT)
    assert result.stdout.splitlines() == ["/usr/x Read-only file system", "/work/f ok", "/tmp/f ok"]
    assert result.result == "(False, False, '/work')"


def test_memory_limit_is_an_error_not_a_crash(make_local_provider: ProviderFactory) -> None:
    sandbox = make_local_provider().get("t:mem")
    sandbox.run("kept = 1", TIMEOUT)
    result = sandbox.run("blob = bytearray(512 * 1024 * 1024)", TIMEOUT)  # limit is 128m
    assert "MemoryError" in (result.error or "")
    assert sandbox.run("kept", TIMEOUT).result == "1"


def test_process_limit_holds(make_local_provider: ProviderFactory) -> None:
    code = (
        "import os\nn = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30)\n        n += 1\n"
        "except OSError as e:\n    print(e.strerror)\nn < 500"
    )
    result = make_local_provider().get("t:pids").run(code, TIMEOUT)
    assert result.stdout == "Resource temporarily unavailable\n" and result.result == "True"


def test_missing_launcher_is_unavailable(settings: Settings) -> None:
    with pytest.raises(SandboxUnavailable, match="no sandbox launcher"):
        LocalSandboxProvider(settings, launcher="chroot")


@pytest.mark.parametrize(
    ("text", "size"), [("64m", 64 << 20), ("1g", 1 << 30), ("512", 512), ("1.5k", 1536)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size
