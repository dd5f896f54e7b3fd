"""What a finished output holds and nothing more, through the real CLI: no empty dead-letter file,
no dead-letter file left by an earlier run of the same output, no staging area."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    import shutil

    import pyarrow.parquet as pq

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
