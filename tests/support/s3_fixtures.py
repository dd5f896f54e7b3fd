"""pytest fixtures for a real S3 server (moto's server mode on a loopback port), shared by the S3
connector tests, the contract suites and the end-to-end runs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.s3_server import S3Server

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server: S3Server) -> Any:
    from assay.connectors.s3 import S3Config

    return S3Config(endpoint_url=s3_server.endpoint_url)


@pytest.fixture(scope="session")
def client(s3_server: S3Server) -> Any:
    return s3_server.client()


@pytest.fixture
def bucket(client: Any) -> str:
    name = f"lake{next(_buckets)}"
    client.create_bucket(Bucket=name)
    return name
