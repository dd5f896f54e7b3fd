"""A real S3-compatible server for tests and benchmarks: moto's server mode on a free loopback port.

>>> with S3Server() as s3:                                     # doctest: +SKIP
...     s3.client().create_bucket(Bucket="lake")
"""

from __future__ import annotations

import os
import socket
from types import TracebackType
from typing import Any

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """``moto.server.ThreadedMotoServer`` bound to 127.0.0.1; ``endpoint_url`` points at it.

    ``start()`` also sets fake credentials in ``os.environ`` (only where none are set), because
    the AWS credential chain needs some; ``stop()`` restores the environment.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._saved: dict[str, str | None] = {}

    def start(self) -> S3Server:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

        for k, v in CREDENTIALS.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
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
