"""OpenAI-compatible proxy in front of a pool of model replicas (vLLM in production).

Start it with `python -m services.llm_proxy` (see `--help`), or in process with `ProxyApp`;
`devstack.llm` starts one as a subprocess for tests and benchmarks.
"""

from services.llm_proxy.app import ProxyApp
from services.llm_proxy.replicas.spec import PoolSpec, ReplicaSpec
from services.llm_proxy.settings import ProxySettings, get_proxy_settings

__all__ = ["PoolSpec", "ProxyApp", "ProxySettings", "ReplicaSpec", "get_proxy_settings"]
