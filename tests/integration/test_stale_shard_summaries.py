"""A merge never counts a stale shard summary, through the real CLI: a shard that starts over
removes its own earlier summary (killed before it wrote a new one, the merge is incomplete, not a
whole output of yesterday's numbers) and the summaries of another shard count (a rerun with
another N merges without ``--shards``)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

HOLD = """
import os, time

def hold(outputs, **kwargs):
    while not os.path.exists(os.path.join(os.path.dirname(__file__), "go")):
        time.sleep(0.01)
    return 1.0
"""


def quickstart(tmp_path: Path) -> Path:
    dest = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", dest, ignore=shutil.ignore_patterns("out", ".assay"))
    (dest / "holdmod.py").write_text(HOLD)
    (dest / "go").touch()
    text = (dest / "run.yaml").read_text()
    (dest / "run.yaml").write_text(
        text.replace("evaluators:\n", "evaluators:\n  - {name: python, params: {function: holdmod:hold}}\n")
    )
    return dest / "run.yaml"


def cli(run_file: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", *args[:1], *([str(run_file)] if args[0] == "run" else []), *args[1:]]


def run(run_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(run_file, *args), capture_output=True, text=True, timeout=120, cwd=run_file.parent)


def test_a_rerun_with_another_shard_count_merges_without_the_old_summaries(tmp_path: Path) -> None:
    f = quickstart(tmp_path)
    out = f.parent / "out"
    for i in range(2):
        assert run(f, "run", "--shard", f"{i}/2", "-q").returncode == 0
    for i in range(3):
        assert run(f, "run", "--shard", f"{i}/3", "-q").returncode == 0
    assert sorted(p.name for p in out.glob("_SUMMARY.shard-*")) == [f"_SUMMARY.shard-{i}-of-3.json" for i in range(3)]
    merged = run(f, "merge", str(out), "-q")
    assert merged.returncode == 0, merged.stderr
    assert json.loads((out / "_SUMMARY.json").read_text())["counts"]["read"] == 43


def test_a_shard_killed_after_it_started_over_leaves_the_merge_incomplete(tmp_path: Path) -> None:
    f = quickstart(tmp_path)
    out = f.parent / "out"
    for i in range(2):
        assert run(f, "run", "--shard", f"{i}/2", "-q").returncode == 0
    assert run(f, "merge", str(out), "-q").returncode == 0 and (out / "_SUCCESS").exists()
    (f.parent / "go").unlink()  # the rerun of shard 1 holds on its first trace
    proc = subprocess.Popen(
        cli(f, "run", "--shard", "1/2", "-q"), cwd=f.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while (out / "_SUMMARY.shard-1-of-2.json").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the shard never started over"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    merged = run(f, "merge", str(out), "-q")
    assert merged.returncode == 1, merged.stderr
    assert "shards without a summary: 1/2" in merged.stderr
    assert not (out / "_SUCCESS").exists()
