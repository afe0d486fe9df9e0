"""The LiteLLM proxy as the comparison point: its own virtualenv, a minimal config, one worker.

Configured as its docs advise for a lean gateway: the local model cost map, no callbacks, no
retries, no database, one worker, a master key from the environment; uvicorn's per-request
access log is off too, so LiteLLM is measured at its leanest.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from devstack.procs import Processes, free_port

__all__ = ["VENV", "LiteLLM", "ensure_litellm", "start_litellm"]

VENV = Path(__file__).resolve().parent / ".litellm-venv"
_EXECUTABLE = VENV / "bin" / "litellm"
_CONFIG = """\
model_list:
  - model_name: {model}
    litellm_params:
      model: openai/{model}
      api_base: {api_base}
      api_key: unused
litellm_settings:
  callbacks: []
  num_retries: 0
  request_timeout: 60
  telemetry: false
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
"""
_LOGGING = """\
version: 1
disable_existing_loggers: false
loggers:
  uvicorn.access:
    level: WARNING
"""


class LiteLLM:
    """A started LiteLLM proxy: where it listens and the key it wants."""

    def __init__(self, url: str, master_key: str) -> None:
        self.url = url
        self.master_key = master_key


def ensure_litellm() -> Path:
    """Create the virtualenv and install `litellm[proxy]` into it unless already there."""
    if _EXECUTABLE.exists():
        return _EXECUTABLE
    print(f"installing litellm[proxy] into {VENV} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "pip"), "install", "--quiet", "litellm[proxy]"]
    subprocess.run(pip, check=True)
    return _EXECUTABLE


def start_litellm(procs: Processes, upstream_url: str, model: str, workdir: Path) -> LiteLLM:
    """Start LiteLLM in front of `upstream_url` (a replica's root URL) and wait for it."""
    executable = ensure_litellm()
    config = workdir / "litellm.yaml"
    config.write_text(_CONFIG.format(model=model, api_base=f"{upstream_url}/v1"))
    logging = workdir / "litellm-logging.yaml"
    logging.write_text(_LOGGING)
    master_key = os.environ.get("LITELLM_MASTER_KEY") or f"sk-bench-{secrets.token_hex(8)}"
    port = free_port()
    argv = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MASTER_KEY": master_key,
        "LITELLM_LOG": "ERROR",
    }
    child = procs.start("litellm", [*argv, "--num_workers", "1", "--log_config", str(logging)], env)
    url = f"http://127.0.0.1:{port}"
    child.wait_http(f"{url}/health/liveliness", timeout_s=120.0)
    return LiteLLM(url, master_key)
