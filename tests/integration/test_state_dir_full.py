"""A full state dir: one warning naming the judge cache, then one clear error naming the
checkpoint file ("no space left on device"), exit 1 — not 1,786 warnings and a bare OSError."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.support.disk import small_tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KB tmpfs (root only; skipped elsewhere)."""
    with small_tmpfs(tmp_path / "disk", "256k") as where:
        yield where


def test_a_full_state_dir_is_one_clear_error(tmp_path: Path, small_disk: Path) -> None:
    records = [{"id": f"t{i}", "inputs": f"question {i} " + "x" * 200, "outputs": f"a{i}"} for i in range(2000)]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with JudgeServerThread(latency=0.001, seed=1) as server:
        judge = {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m", "rpm": 600000}
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {"j": {**judge, "max_concurrency": 16}},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": "out/"},
            "state_dir": str(small_disk / "state"),
        }
        (tmp_path / "run.yaml").write_text(json.dumps(cfg))
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", "run.yaml", "-q"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) < 10, proc.stderr[-3000:]
    cache_warnings = [line for line in lines if "judge cache write failed" in line]
    # the cache fills first (its answers outgrow the checkpoints): said once, naming the file
    assert len(cache_warnings) <= 1
    assert all(str(small_disk / "state" / "judge_cache.sqlite") in w for w in cache_warnings)
    error = lines[-1]
    assert error.startswith(f"assay: error: state dir: cannot write {small_disk / 'state' / 'checkpoints'}")
    assert error.endswith("no space left on device") and "Traceback" not in proc.stderr
