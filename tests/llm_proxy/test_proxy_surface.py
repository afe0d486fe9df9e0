"""The package's declared public surface and its CLI."""

from __future__ import annotations

import subprocess
import sys

import openai
from proxy_support import API_KEY, ReplicaFactory

import services.llm_proxy as proxy


def test_the_public_surface_is_declared_and_importable() -> None:
    assert set(proxy.__all__) == {
        "PoolSpec",
        "ProxyApp",
        "ProxySettings",
        "ReplicaSpec",
        "get_proxy_settings",
    }
    for name in proxy.__all__:
        assert getattr(proxy, name) is not None


def test_the_cli_documents_its_flags() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "services.llm_proxy", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for flag in ("--host", "--port", "--upstreams", "--pool-file", "--policy"):
        assert flag in result.stdout


async def test_the_proxy_runs_in_process_on_the_current_loop(replicas: ReplicaFactory) -> None:
    (replica,) = replicas(1)
    settings = proxy.ProxySettings(
        proxy_upstreams=replica.url, llm_api_key=API_KEY, proxy_redis_sync=False
    )
    app = proxy.ProxyApp(settings)
    port = await app.start(port=0)
    try:
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0
        )
        reply = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "in process"}]
        )
        assert reply.choices[0].message.content
        await client.close()
    finally:
        await app.stop()
