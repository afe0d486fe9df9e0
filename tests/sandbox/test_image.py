"""The sandbox image: built idempotently, unprivileged, the kernel as its entry point."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]


def test_build_is_skipped_when_inputs_did_not_change(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    before = docker_client.images.get(sandbox_image).id
    build = subprocess.run(
        [ROOT / "scripts" / "build_sandbox_image.sh"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SANDBOX_IMAGE": sandbox_image},
    )
    assert "up to date" in build.stderr
    assert docker_client.images.get(sandbox_image).id == before


def test_image_runs_the_kernel_as_nobody(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    config = docker_client.images.get(sandbox_image).attrs["Config"]
    assert config["User"] == "65534:65534"
    # Debian's interpreter, the one its numpy, pandas and matplotlib are installed for.
    assert config["Entrypoint"] == ["/usr/bin/python3", "-P", "-m", "kernel"]


def test_image_ships_numpy_pandas_and_matplotlib(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    code = (
        "import numpy, pandas, matplotlib, os\n"
        "print(numpy.__version__, pandas.__version__, matplotlib.__version__)\n"
        "print(sorted(os.listdir(os.environ['TASKYARD_MPL_CACHE'])))"
    )
    out = docker_client.containers.run(
        sandbox_image, ["-c", code], entrypoint="/usr/bin/python3", network_mode="none",
        remove=True, read_only=True, tmpfs={"/tmp": "size=16m"},
    ).decode()  # fmt: skip
    versions, cache = out.splitlines()
    assert len(versions.split()) == 3
    assert "fontlist-v" in cache  # matplotlib's font list, made at build time


def test_setup_docker_is_a_no_op_when_the_engine_answers(
    docker_client: docker.DockerClient,
) -> None:
    setup = subprocess.run(
        [ROOT / "scripts" / "setup_docker.sh"], capture_output=True, text=True, check=True
    )
    assert setup.stderr == ""  # it neither installed nor started anything
    assert docker_client.ping()
