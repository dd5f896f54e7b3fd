"""The example nightly DAG and the operators' exit-code mapping, run by a real Apache Airflow.

Airflow is not a dependency of the test environment (its ~150 packages and pins would weigh on
every other test), and the tests never install it: ``.ci/run`` installs it once, before pytest,
into a virtual environment of its own under ``$TMPDIR`` that sees this environment's packages
(``--system-site-packages``), and passes it as ``$ASSAY_AIRFLOW_VENV``. Without it these tests
skip, saying how to provide it — except in CI (``CI=true``), where they must run. The module's
tests run on one xdist worker and share one ``AIRFLOW_HOME`` with a SQLite metadata database
(``airflow db migrate``), the DAG files in ``dags/``, ``airflow dags reserialize``, then ``airflow
dags test DAG DATE``; the task states and XCom values are read back from that database.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
AIRFLOW_SPEC = "apache-airflow>=3.0,<4"  # what .ci/run installs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group("airflow"),  # one worker runs them all: one AIRFLOW_HOME, one `db migrate`
]


def airflow_missing(venv: str | None) -> str | None:
    """Why ``$ASSAY_AIRFLOW_VENV`` is not a usable Airflow 3 environment (None when it is)."""
    if not venv:
        return "ASSAY_AIRFLOW_VENV is not set"
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        return f"ASSAY_AIRFLOW_VENV={venv} has no bin/python"
    probe = subprocess.run([python, "-c", "import airflow.sdk"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"Airflow 3 is not importable in ASSAY_AIRFLOW_VENV={venv}: {probe.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="session")
def airflow_bin() -> Path:
    """The ``airflow`` executable of ``$ASSAY_AIRFLOW_VENV`` (never installed here)."""
    venv = os.environ.get("ASSAY_AIRFLOW_VENV")
    why = airflow_missing(venv)
    if why is not None:
        how = (
            f"{why}; .ci/run provides it (python -m venv --system-site-packages DIR && "
            f"DIR/bin/pip install '{AIRFLOW_SPEC}', then ASSAY_AIRFLOW_VENV=DIR)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the Airflow tests: {how}")
        pytest.skip(f"no Apache Airflow: {how}")
    assert venv is not None
    return Path(venv) / "bin" / "airflow"


class Airflow:
    """One AIRFLOW_HOME and the commands run in it."""

    def __init__(self, airflow: Path, home: Path, env: dict[str, str]) -> None:
        self.airflow = airflow
        self.home = home
        self.env = env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.airflow), *args],
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
        if check:
            tail = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            assert result.returncode == 0, f"airflow {' '.join(args)}:\n{tail}"
        return result

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return db.execute(sql, params).fetchall()

    def states(self, dag_id: str) -> dict[tuple[str, int], tuple[str, int]]:
        """(task, map index) → (state, tries) of the DAG's last run."""
        rows = self.query("SELECT task_id, map_index, state, try_number FROM task_instance WHERE dag_id = ?", dag_id)
        return {(t, m): (s, n) for t, m, s, n in rows}

    def xcom(self, dag_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        rows = self.query(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = ? AND map_index = ?",
            dag_id,
            task_id,
            key,
            map_index,
        )
        assert len(rows) == 1, f"xcom {task_id}[{map_index}] {key}: {rows}"
        value = rows[0][0]
        return json.loads(value if isinstance(value, str) else value.decode())


@pytest.fixture(scope="module")
def airflow(airflow_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Airflow]:
    home = tmp_path_factory.mktemp("airflow_home")
    work = tmp_path_factory.mktemp("assay_work")
    (home / "dags").mkdir()
    shutil.copy(REPO / "examples" / "airflow" / "assay_nightly.py", home / "dags")
    shutil.copy(HERE / "exit_codes_dag.py", home / "dags")
    shutil.copy(HERE / "batch_deferrable_dag.py", home / "dags")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        # the example DAG and its run file
        "ASSAY_RUN_FILE": str(REPO / "examples" / "airflow" / "nightly.yaml"),
        "ASSAY_SHARDS": "2",
        "ASSAY_RESULTS_DIR": str(work / "results"),
        "ASSAY_STATE_DIR": str(work / "state"),
        # the exit-code DAG
        "ASSAY_TEST_RUN_FILE": str(REPO / "examples" / "quickstart" / "run.yaml"),
        "ASSAY_TEST_OUT": str(work / "codes"),
        "ASSAY_TEST_FAKE": str(HERE / "fake_assay.py"),
        # the deferrable batch DAG (its run file is written by the test)
        "ASSAY_BATCH_RUN_FILE": str(work / "batch" / "run.yaml"),
    }
    af = Airflow(airflow_bin, home, env)
    af.run("db", "migrate")
    af.run("dags", "reserialize")
    yield af


def test_nightly_dag_scores_yesterday_in_shards_and_merges(airflow: Airflow) -> None:
    airflow.run("dags", "test", "assay_nightly", "2026-11-22")
    assert airflow.states("assay_nightly") == {
        ("score", 0): ("success", 1),
        ("score", 1): ("success", 1),
        ("merge", -1): ("success", 1),
    }
    results = Path(airflow.env["ASSAY_RESULTS_DIR"]) / "dt=2026-11-21"  # the day before the logical date
    shards = [airflow.xcom("assay_nightly", "score", map_index=i) for i in (0, 1)]
    merged = airflow.xcom("assay_nightly", "merge")
    assert merged == json.loads((results / "_SUMMARY.json").read_text())
    assert merged["status"] == "ok" and merged["exit_code"] == 0 and merged["run_id"] == "nightly-2026-11-21"
    assert merged["counts"]["read"] == sum(s["counts"]["read"] for s in shards) == 43  # the quickstart traces
    assert merged["shards"]["present"] == [0, 1]
    assert {g["key"] for g in merged["gates"]} == {"tool_call_accuracy", "trajectory_unordered_match"}
    assert (results / "_SUCCESS").exists()


def test_exit_codes_map_to_task_states(airflow: Airflow) -> None:
    result = airflow.run("dags", "test", "assay_exit_codes", "2026-11-22", check=False)
    assert result.returncode != 0  # the DAG run fails: most of its tasks do
    states = airflow.states("assay_exit_codes")
    # retries=1: a retryable failure is tried twice, a final one once
    assert states == {
        ("exit_0", -1): ("success", 1),
        ("exit_1", -1): ("failed", 2),  # infrastructure: retried
        ("exit_2", -1): ("failed", 1),  # bad config: no retry
        ("exit_3", -1): ("failed", 1),  # gate failed: no retry
        ("exit_4", -1): ("failed", 1),  # dead letters: no retry
        ("exit_5", -1): ("failed", 2),  # budget: retried (resumes)
        ("exit_6", -1): ("failed", 2),  # still running elsewhere: retried
        ("exit_130", -1): ("failed", 2),  # interrupted: retried (resumes)
    }
    assert airflow.xcom("assay_exit_codes", "exit_0")["run_id"] == "fake-0"
    gate = airflow.xcom("assay_exit_codes", "exit_3", key="assay_summary")
    assert gate["status"] == "gate_failed"
    logs = "\n".join(p.read_text(errors="replace") for p in (airflow.home / "logs").rglob("*.log"))
    logs += result.stdout + result.stderr
    assert "assay exited 3: a quality gate failed" in logs and "reason-3" in logs


def test_deferrable_batch_run_defers_while_batches_are_pending_then_collects(airflow: Airflow) -> None:
    """``deferrable=True`` over a ``mode: batch`` judge: the first invocation submits and exits 75,
    the task defers to the trigger (which polls the stand-in batch API), then the same command
    collects, scores and publishes; no line is submitted twice and no real-time call is made."""
    from assay.testing.batch_server import BatchServerThread

    run = Path(airflow.env["ASSAY_BATCH_RUN_FILE"])
    run.parent.mkdir(parents=True, exist_ok=True)
    (run.parent / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": f"t{i}", "inputs": f"q {i}", "outputs": f"a {i}", "reference_outputs": f"a {i}"}) + "\n"
            for i in range(40)
        )
    )
    with BatchServerThread(delay=(2.0, 3.0), seed=3) as server:
        run.write_text(
            json.dumps(
                {
                    "source": {"path": "corpus.jsonl"},
                    "state_dir": "state",
                    "judges": {
                        "gpt": {
                            "provider": "openai",
                            "base_url": f"{server.url}/v1",
                            "model": "judge-1",
                            "mode": "batch",
                            "batch": {"max_requests": 15, "poll_interval_s": 0.2},
                        }
                    },
                    "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}],
                    "sink": {"path": "out/"},
                }
            )
        )
        result = airflow.run("dags", "test", "assay_batch_deferrable", "2026-11-22")
        stats = server.stats
        assert stats.batches == 3 and len(stats.submissions) == 40
        assert set(stats.submissions.values()) == {1}  # each line submitted once: the rerun collected
        assert server.server.judge.stats.requests == 0  # no real-time call
    assert airflow.states("assay_batch_deferrable") == {("score", -1): ("success", 1)}
    summary = airflow.xcom("assay_batch_deferrable", "score")
    assert summary["status"] == "ok" and summary["counts"]["read"] == 40
    out = run.parent / "out"
    assert (out / "_SUCCESS").exists()
    scored = [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in scored) == sorted(f"t{i}" for i in range(40))
    assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in scored)
    logs = "\n".join(p.read_text(errors="replace") for p in (airflow.home / "logs").rglob("*.log"))
    logs += result.stdout + result.stderr
    assert "deferring until they finish" in logs
