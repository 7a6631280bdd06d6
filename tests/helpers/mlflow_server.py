"""A real ``mlflow server`` process for tests (sqlite backend under a tmp folder, a free port on
127.0.0.1): started, killed (SIGKILL: an outage), restarted on the same port and store."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, folder: Path, port: int | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def db(self) -> Path:
        return self.folder / "server.db"

    def start(self, timeout: float = 120.0) -> MlflowServer:
        exe = Path(sys.executable).parent / "mlflow"
        cmd = [str(exe), "server", "--backend-store-uri", f"sqlite:///{self.db}",
               "--artifacts-destination", str(self.folder / "artifacts"),
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]  # fmt: skip
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 (the process keeps it)
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise RuntimeError(f"mlflow server exited {code}: see {self.folder}/server.log")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"mlflow server did not answer in {timeout} s: see {self.folder}/server.log")

    def kill(self) -> None:
        """SIGKILL the server's process group (the server and its uvicorn worker)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None
