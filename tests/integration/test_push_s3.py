"""Pushing an output that lives on S3 (moto's server on loopback): ``assay run`` from S3 to S3 pushes
right after publishing, the push section and dead letters land beside the output on S3, a second
``assay push`` sends nothing, and an output without ``_SUCCESS`` is never pushed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.testing.langfuse_server import LangfuseServerThread
from assay.testing.langsmith_server import LangSmithServerThread
from tests.support.push_corpus import write_corpus
from tests.support.s3_server import S3Server

KEYS = {"LANGSMITH_API_KEY": "ls-key", "LANGFUSE_PUBLIC_KEY": "pk-lf", "LANGFUSE_SECRET_KEY": "sk-lf"}
DS = "2026-11-20"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **KEYS},
        cwd=cwd,
    )


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_s3_output_is_pushed_once_with_its_summary_and_dead_letters_on_s3(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str, fmt: str
) -> None:
    corpus = write_corpus(tmp_path / "traces.jsonl", 12)
    body = (tmp_path / "traces.jsonl").read_bytes()
    client.put_object(Bucket=bucket, Key=f"traces/dt={DS}/part-000.jsonl", Body=body)
    ids = [t for t, _ in corpus]
    sink: dict[str, Any] = {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/"}
    if fmt == "parquet":
        sink["format"] = "parquet"
    with (
        LangSmithServerThread(api_key="ls-key", runs=ids[:10]) as ls,
        LangfuseServerThread(public_key="pk-lf", secret_key="sk-lf", traces=ids) as lf,
    ):
        cfg = {
            "source": {"path": f"s3://{bucket}/traces/dt={{{{ ds }}}}/"},
            "evaluators": [{"name": "contains", "params": {"substring": "sunny"}}],
            "sink": sink,
            "s3": {"endpoint_url": s3_server.endpoint_url},
            "push": [
                {"type": "langsmith", "api_url": ls.url, "retries": 2},
                {"type": "langfuse", "host": lf.url, "retries": 2},
            ],
        }
        run = tmp_path / "run.yaml"
        run.write_text(json.dumps(cfg))
        done = cli("run", str(run), "--ds", DS, "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        prefix = f"scores/dt={DS}/"

        def summary() -> dict[str, Any]:
            body = client.get_object(Bucket=bucket, Key=prefix + "_SUMMARY.json")["Body"].read()
            return json.loads(body)  # type: ignore[no-any-return]

        section = summary()["push"]
        assert (section["langsmith"]["delivered"], section["langsmith"]["rejected"]) == (10, 2)
        assert (section["langfuse"]["delivered"], section["langfuse"]["rejected"]) == (12, 0)
        assert len(ls.server.feedback) == 10 and len(lf.server.scores) == 12
        dead = client.get_object(Bucket=bucket, Key=prefix + "_push_dead_letter/langsmith.jsonl")["Body"].read()
        assert sorted(json.loads(line)["trace_id"] for line in dead.splitlines()) == sorted(ids[10:])
        # the same command again: nothing new is sent, the counts stand
        again = cli("push", str(run), "--ds", DS, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        section = summary()["push"]
        assert section["langsmith"]["sent"] == 0 and section["langfuse"]["sent"] == 0
        assert section["langsmith"]["delivered"] == 10 and ls.server.stats.duplicates == 0
        assert len(lf.server.scores) == 12 and lf.server.stats.duplicates == 0
        # an output without _SUCCESS (withdrawn) is never pushed
        client.delete_object(Bucket=bucket, Key=prefix + "_SUCCESS")
        before = ls.server.stats.requests
        refused = cli("push", str(run), "--ds", DS, cwd=tmp_path)
        assert refused.returncode == 1 and "is not published (no _SUCCESS)" in refused.stderr
        assert ls.server.stats.requests == before
