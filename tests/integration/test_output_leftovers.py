"""What a finished output holds and nothing more, through the real CLI: no empty dead-letter file,
no dead-letter file left by an earlier run of the same output, no staging area."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import agent_messages


def corpus(path: Path, *, broken: bool) -> Path:
    lines = [json.dumps({"id": f"t{i}", "messages": agent_messages(final=f"a{i}")}) for i in range(20)]
    if broken:
        lines[7] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    return path


def score(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "assay.cli", "score", str(src), "-e", "exact_match", "-o", str(out), "-q"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=src.parent)


def test_no_dead_letters_no_dead_letter_file_and_none_left_from_an_earlier_run(tmp_path: Path) -> None:
    src = corpus(tmp_path / "traces.jsonl", broken=True)
    out = tmp_path / "scores.jsonl"
    dead = tmp_path / "scores.dead_letter.jsonl"
    assert score(src, out).returncode == 0
    assert len(dead.read_text().splitlines()) == 1  # the broken line
    corpus(src, broken=False)
    r = score(src, out)
    assert r.returncode == 0, r.stderr
    assert len(out.read_text().splitlines()) == 20
    assert not dead.exists()  # neither empty nor the earlier run's
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".scores")]  # no staging left


def test_a_directory_output_without_dead_letters_holds_no_empty_file(tmp_path: Path) -> None:
    src = corpus(tmp_path / "traces.jsonl", broken=False)
    r = score(src, tmp_path / "out/")
    assert r.returncode == 0, r.stderr
    empty = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and not p.stat().st_size]
    assert [p.name for p in empty] == ["_SUCCESS"]


def test_a_merged_parquet_output_holds_no_staging_area_and_a_shard_rerun_keeps_the_others(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    dest = tmp_path / "q"
    shutil.copytree(repo / "examples" / "quickstart", dest, ignore=shutil.ignore_patterns("out", ".assay"))
    f = dest / "run.yaml"
    f.write_text(f.read_text().replace("  path: out/\n", "  path: out/\n  format: parquet\n"))
    out = dest / "out"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "assay.cli", *args, "-q"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=dest)

    def rows() -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in out.glob("part-*.parquet"))

    for i in range(2):
        assert cli("run", str(f), "--shard", f"{i}/2").returncode == 0
    merged = cli("merge", str(out))
    assert merged.returncode == 0, merged.stderr
    assert (out / "_SUCCESS").exists() and not (out / "_staging").exists()
    whole = rows()
    assert whole == json.loads((out / "_SUMMARY.json").read_text())["counts"]["scored"] > 0
    assert cli("run", str(f), "--shard", "1/2").returncode == 0  # one shard again: the other's parts stay
    assert cli("merge", str(out)).returncode == 0
    assert rows() == whole and not (out / "_staging").exists()


SLOW = "import time\n\ndef slow(outputs, **kwargs):\n    time.sleep(0.01)\n    return 1.0\n"


def test_staging_beside_a_parquet_file_is_the_resume_state_and_no_more(tmp_path: Path) -> None:
    """A failed run that wrote nothing leaves no staging area; a killed one leaves its committed
    rows in ``.scores.parquet.parts/`` (what the rerun resumes from), and the rerun's finished
    output holds none."""
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = tmp_path / "run.yaml"
    f.write_text(
        "source: {path: traces.jsonl}\nevaluators: [{name: python, params: {function: slowmod:slow}}]\n"
        "sink: {path: scores.parquet}\nlimits: {batch_size: 10, commit_interval_s: 0.2}\n"
    )
    cmd = [sys.executable, "-m", "assay.cli", "run", str(f), "-q"]
    missing = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert missing.returncode == 1, missing.stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".parts")]

    lines = [json.dumps({"id": f"t{i}", "messages": agent_messages(final=f"a{i}")}) for i in range(400)]
    (tmp_path / "traces.jsonl").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = tmp_path / ".scores.parquet.parts"
    deadline = time.monotonic() + 60
    while not (parts.is_dir() and any(p.name.startswith("seg-") for p in parts.iterdir())):
        assert time.monotonic() < deadline and proc.poll() is None, "no committed segment"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert pq.ParquetFile(tmp_path / "scores.parquet").metadata.num_rows == 400
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".parts")]
