"""A day that is no day never leaves the output: a Delta sink's ``ds: ../../X``, given in the run file,
with ``--set sink.ds=…`` or through ``${ENV}``, stops the run before anything is written (exit 2,
one line naming the key), through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lake import traces, write_parquet

ESCAPE = "../../X"


def tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.parametrize("how", ["run file", "--set", "${ENV}", "run file ds:"])
def test_a_delta_day_that_escapes_is_refused_and_nothing_is_written(tmp_path: Path, how: str) -> None:
    work = tmp_path / "a" / "b" / "w"
    write_parquet(work / "in" / "traces.parquet", traces(day="21"))
    sink: dict[str, str] = {"type": "delta", "path": "lake/scores"}
    cfg: dict[str, object] = {"source": {"path": "in/traces.parquet"}, "evaluators": ["exact_match"], "sink": sink}
    args = ["--ds", "2026-11-21"]
    env = {**os.environ}
    if how == "run file":
        sink["ds"] = ESCAPE
    elif how == "--set":
        args += ["--set", f"sink.ds={ESCAPE}"]
    elif how == "${ENV}":
        sink["ds"] = "${NIGHT}"
        env["NIGHT"] = ESCAPE
    else:
        cfg["ds"] = ESCAPE
        args = []
    f = work / "nightly.yaml"
    f.write_text(json.dumps(cfg))
    before = tree(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(f), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env=env,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    key = "ds" if how == "run file ds:" else "sink.ds"
    assert f"nightly.yaml: {key}: expected a day YYYY-MM-DD" in lines[0]
    assert "Traceback" not in r.stderr
    assert tree(tmp_path) == before  # nothing written anywhere: not in the table, not beside it
