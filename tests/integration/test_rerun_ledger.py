"""``assay run`` again over a published output, with every sink (issue 29 §2): only missing or
stale (trace, key) pairs are scored, kept results stay as they were, traces gone from the input
lose their rows, and a rerun with nothing left changes nothing (no new Delta commit, the same
bytes) — without the judge cache. The evaluator here is a user function that records each
trace it scores, so the test counts exactly what was evaluated."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.s3_server import S3Server

DS = "2026-06-01"
COUNTER = """
import os

def counted(outputs, **kwargs):
    with open(os.environ["ASSAY_TEST_CALLS"], "a") as f:
        f.write(str(outputs) + "\\n")
    return {"key": "counted", "score": 1.0 if str(outputs).endswith("0") else 0.0}
"""


def corpus(root: Path, ids: range | list[int]) -> None:
    lines = [json.dumps({"id": f"t{i}", "outputs": f"a{i}", "reference_outputs": f"a{i % 3}"}) for i in ids]
    (root / "in.jsonl").write_text("\n".join(lines) + "\n")


def run_file(root: Path, sink: dict[str, Any], s3: S3Server | None) -> Path:
    (root / "countmod.py").write_text(COUNTER)
    cfg: dict[str, Any] = {
        "source": {"path": "in.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "countmod:counted"}}],
        "sink": sink,
        "limits": {"batch_size": 7},
    }
    if s3 is not None:
        cfg["s3"] = {"endpoint_url": s3.endpoint_url}
    f = root / "run.yaml"
    f.write_text(json.dumps(cfg))
    return f


def run(root: Path, f: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {"ASSAY_TEST_CALLS": str(root / "calls.txt"), "PYTHONPATH": str(root)}
    import os

    return subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(f), "--ds", DS, "-q", "--no-cache", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, **env, "PYTHONPATH": f"{root}:{os.environ.get('PYTHONPATH', '')}"},
    )


def calls(root: Path) -> list[str]:
    p = root / "calls.txt"
    lines = p.read_text().splitlines() if p.exists() else []
    p.unlink(missing_ok=True)
    return sorted(lines)


def _parquet_rows(data: bytes) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data)).to_pylist()  # type: ignore[no-any-return]


class Output:
    """Read one sink's published output: every file's bytes and the rows as dicts."""

    def __init__(self, kind: str, root: Path, client: Any = None, bucket: str = "") -> None:
        self.kind, self.root, self.client, self.bucket = kind, root, client, bucket

    def files(self) -> dict[str, bytes]:
        if self.kind.startswith("s3"):
            listing = self.client.list_objects_v2(Bucket=self.bucket, Prefix="scores/").get("Contents", [])
            return {
                o["Key"]: self.client.get_object(Bucket=self.bucket, Key=o["Key"])["Body"].read()
                for o in listing
                if "_staging" not in o["Key"]
            }
        base = self.root / ("lake" if self.kind == "delta" else "out")
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}

    def rows(self) -> dict[str, dict[str, Any]]:
        if self.kind == "delta":
            from deltalake import DeltaTable

            got = DeltaTable(str(self.root / "lake")).to_pyarrow_table().to_pylist()
        else:
            got = []
            for name, data in self.files().items():
                base = name.rsplit("/", 1)[-1]
                if not base.startswith("part-"):
                    continue
                if base.endswith(".parquet"):
                    got += _parquet_rows(data)
                else:
                    data = gzip.decompress(data) if base.endswith(".gz") else data
                    got += [json.loads(x) for x in data.splitlines() if x]
        out: dict[str, dict[str, Any]] = {}
        for r in got:
            assert r["trace_id"] not in out, f"two rows for {r['trace_id']}"
            out[r["trace_id"]] = r
        return out


def result(row: dict[str, Any], key: str) -> Any:
    return row["results"][key] if "results" in row else row[key]


SINKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "jsonl": lambda b: {"path": "out/"},
    "parquet": lambda b: {"path": "out/", "format": "parquet"},
    "delta": lambda b: {"type": "delta", "path": "lake"},
    "s3-jsonl": lambda b: {"path": f"s3://{b}/scores/dt={{{{ ds }}}}/", "compression": "gzip"},
    "s3-parquet": lambda b: {"path": f"s3://{b}/scores/dt={{{{ ds }}}}/", "format": "parquet"},
}


@pytest.mark.parametrize("kind", list(SINKS))
def test_a_rerun_scores_only_missing_and_stale_pairs(tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    s3 = client = None
    bucket = ""
    if kind.startswith("s3"):
        s3 = request.getfixturevalue("s3_server")
        client = request.getfixturevalue("client")
        bucket = request.getfixturevalue("bucket")
    out = Output(kind, tmp_path, client, bucket)
    corpus(tmp_path, range(30))
    f = run_file(tmp_path, SINKS[kind](bucket), s3)

    first = run(tmp_path, f)
    assert first.returncode == 0, first.stderr
    assert len(calls(tmp_path)) == 30
    before_files, before = out.files(), out.rows()
    assert len(before) == 30

    # nothing left: nothing evaluated, nothing written (no new Delta commit), the verdict again
    again = run(tmp_path, f)
    assert again.returncode == 0, again.stderr
    assert "nothing to score" in again.stderr
    assert calls(tmp_path) == []
    assert out.files() == before_files

    # a new evaluator, five late traces, three gone: only the missing pairs are scored
    corpus(tmp_path, range(3, 35))
    cfg = json.loads(f.read_text())
    cfg["evaluators"].append({"name": "exact_match"})
    f.write_text(json.dumps(cfg))
    third = run(tmp_path, f)
    assert third.returncode == 0, third.stderr
    assert calls(tmp_path) == sorted(f"a{i}" for i in range(30, 35))  # the late traces only
    after = out.rows()
    assert sorted(after) == sorted(f"t{i}" for i in range(3, 35))  # one row per trace of the input
    for tid in (f"t{i}" for i in range(3, 30)):
        assert result(after[tid], "counted") == result(before[tid], "counted")  # kept as it was
    assert all(result(r, "exact_match") is not None for r in after.values())
    summary = json.loads(out.files()[next(k for k in out.files() if k.endswith("_SUMMARY.json"))])
    assert summary["pairs"] == {"kept": 27, "scored": 27 + 5 * 2, "dropped": 3}

    # --fresh scores everything again
    fresh = run(tmp_path, f, "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert len(calls(tmp_path)) == 32
