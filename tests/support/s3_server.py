"""A real S3-compatible server for tests and benchmarks: moto's server mode on a free loopback port.

>>> with S3Server() as s3:                                     # doctest: +SKIP
...     s3.client().create_bucket(Bucket="lake")
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from types import TracebackType
from typing import Any

from tests.support.processes import free_port, stop_process

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """moto's S3 server bound to 127.0.0.1; ``endpoint_url`` points at it.

    In a thread of this process by default (``ThreadedMotoServer``); ``process=True`` runs
    ``python -m moto.server`` as a child process instead, so that its CPU time does not compete
    with the code under test for this process's GIL (benchmarks).

    ``start()`` also sets fake credentials in ``os.environ`` , because
    the AWS credential chain needs some; ``stop()`` restores the environment.
    """

    def __init__(self, *, process: bool = False) -> None:
        self.process = process
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._saved: dict[str, str | None] = {}

    def start(self) -> S3Server:
        for k, v in CREDENTIALS.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        if self.process:
            cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
            self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._wait_ready()
            return self
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not start on port {self.port}")

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved.clear()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def client(self) -> Any:
        """A plain (sync) boto3-style client for arranging and inspecting test data."""
        import botocore.session

        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def reset(self) -> None:
        """Drop every bucket (moto's reset endpoint)."""
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass
