"""A sampled judged run as a user runs it: `assay run` with `sample:` on the judge evaluator,
against the stand-in judge server; the same traces are picked by every rerun and worker count."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread

N = 300


@pytest.fixture
def server() -> Iterator[JudgeServerThread]:
    with JudgeServerThread(seed=2) as s:
        yield s


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    lines = []
    for i in range(N):
        model = "rare" if i % 25 == 0 else "common"  # 12 rare, 288 common
        rec = {"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}", "reference_outputs": f"a{i}"}
        lines.append(json.dumps({**rec, "metadata": {"model": model}}))
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_file(tmp_path: Path, url: str, out: str) -> Path:
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {"standin": {"base_url": f"{url}/v1", "model": "judge-1", "max_concurrency": 8}},
        "evaluators": [
            {"name": "exact_match"},
            {
                "name": "llm_judge",
                "params": {"prompt": "correctness", "judge": "standin"},
                "sample": {"rate": 0.05, "seed": 3, "strata": "metadata.model", "min_per_stratum": 8},
            },
        ],
        "sink": {"path": f"{out}/"},
        "limits": {"batch_size": 16},
    }
    f = tmp_path / f"{out}.yaml"
    f.write_text(json.dumps(cfg))
    return f


def assay(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def test_a_sampled_run_picks_the_same_traces_across_reruns_and_workers(
    tmp_path: Path, corpus: Path, server: JudgeServerThread
) -> None:
    proc = assay(tmp_path, "run", str(run_file(tmp_path, server.url, "one")), "-q")
    assert proc.returncode == 0, proc.stderr
    first = rows(tmp_path / "one")
    assert len(first) == N and all("exact_match" in r["results"] for r in first)
    judged = {r["trace_id"]: r["results"]["correctness"] for r in first if "correctness" in r["results"]}
    rare = {f"t{i}" for i in range(0, N, 25)}
    # the rare stratum gets its minimum of 8 of 12; the common one about 5 % of 288, at least 8
    assert len(judged.keys() & rare) == 8 and 8 <= len(judged.keys() - rare) <= 30
    assert server.stats.ok == len(judged)  # no judge call for an unsampled trace
    weights = {r["metadata"]["sample_weight"] for r in judged.values()}
    assert weights == {12 / 8, 1 / max(0.05, 8 / 288)}
    summary = json.loads((tmp_path / "one" / "_SUMMARY.json").read_text())
    assert summary["sampling"]["correctness"]["sampled"] == len(judged)
    assert summary["sampling"]["correctness"]["rate"] == 0.05
    assert summary["evaluators"]["correctness"]["count"] == len(judged)
    assert summary["evaluators"]["correctness"]["weighted"] is True
    assert summary["evaluators"]["exact_match"]["count"] == N

    proc = assay(tmp_path, "run", str(run_file(tmp_path, server.url, "two")), "-q", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    second = rows(tmp_path / "two")
    assert len(second) == N
    assert {r["trace_id"] for r in second if "correctness" in r["results"]} == judged.keys()

    f = run_file(tmp_path, server.url, "three")
    for i in range(2):  # each shard counts the whole input: the same strata thresholds, the same sample
        proc = assay(tmp_path, "run", str(f), "-q", "--shard", f"{i}/2")
        assert proc.returncode == 0, proc.stderr
    merged = assay(tmp_path, "merge", "three", "-q")
    assert merged.returncode == 0, merged.stderr
    third = rows(tmp_path / "three")
    assert len(third) == N
    assert {r["trace_id"] for r in third if "correctness" in r["results"]} == judged.keys()
    summary = json.loads((tmp_path / "three" / "_SUMMARY.json").read_text())
    assert summary["evaluators"]["correctness"]["count"] == len(judged)
    assert summary["sampling"]["correctness"]["sampled"] == len(judged)  # over both shards


def test_dry_run_estimates_only_the_sampled_calls(tmp_path: Path, corpus: Path, server: JudgeServerThread) -> None:
    import anyio

    from assay.config import load_run_file
    from assay.pipeline.dry_run import dry_run

    config = load_run_file(run_file(tmp_path, server.url, "dry"))
    report = anyio.run(lambda: _in(tmp_path, dry_run, config))
    calls = {row["evaluator"]: row["calls"] for row in report["evaluators"]}
    assert 16 <= calls["correctness"] <= 38 and server.stats.requests == 0


async def _in(cwd: Path, fn: Any, *args: Any) -> Any:
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return await fn(*args)
    finally:
        os.chdir(old)


@pytest.mark.parametrize(
    "sample",
    [{"rate": 0.1}, {"rate": 0.05, "strata": "metadata.model", "min_per_stratum": 8}],
    ids=["rate", "strata"],
)
def test_batch_mode_submits_only_the_sampled_requests(tmp_path: Path, corpus: Path, sample: dict[str, Any]) -> None:
    import os

    from assay.testing.batch_server import BatchServerThread

    with BatchServerThread(delay=0.2, seed=2) as server:
        judge = {"base_url": f"{server.url}/v1", "model": "judge-1", "mode": "batch", "batch": {"poll_interval_s": 0.2}}
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {"gpt": judge},
            "evaluators": [
                {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}, "sample": sample}
            ],
            "sink": {"path": "out/"},
        }
        (tmp_path / "run.yaml").write_text(json.dumps(cfg))
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", "run.yaml", "--wait", "-q"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        out = rows(tmp_path / "out")
        judged = [r for r in out if "correctness" in r["results"]]
        assert len(out) == N and 0 < len(judged) < N / 5
        assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in judged)
        assert len(server.stats.submissions) == len(judged)  # no line for an unsampled trace
