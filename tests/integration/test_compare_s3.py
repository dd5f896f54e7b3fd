"""``assay compare`` on runs in S3 (moto's server on loopback): the same answer as locally."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.report import close_stores
from assay.report.compare_command import compare_command
from tests.support.s3_server import S3Server
from tests.unit.report.test_compare_paired import pair, write_run


@pytest.fixture
def endpoint(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    yield s3_server.endpoint_url
    close_stores()


def test_compare_s3_runs_equals_local(
    tmp_path: Path, client: Any, bucket: str, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = pair(8, drop=0.15)
    local = {"b": write_run(tmp_path / "b", before), "a": write_run(tmp_path / "a", after)}
    for name, root in local.items():
        for p in Path(root).iterdir():
            client.put_object(Bucket=bucket, Key=f"scores/{name}/{p.name}", Body=p.read_bytes())
    code = compare_command(f"s3://{bucket}/scores/b/", f"s3://{bucket}/scores/a/", json_out=True, fail_on="regression")
    remote = json.loads(capsys.readouterr().out)
    assert compare_command(local["b"], local["a"], json_out=True, fail_on="regression") == code == 3
    here = json.loads(capsys.readouterr().out)
    assert remote["keys"] == here["keys"] and remote["matched"] == here["matched"] == 400
