"""What every real service the tests start needs: a free loopback port, and a stop that
always ends the process (SIGTERM, then SIGKILL after a grace period)."""

from __future__ import annotations

import socket
import subprocess
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
