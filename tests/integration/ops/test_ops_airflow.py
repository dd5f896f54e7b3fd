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
    shutil.copy(HERE / "backfill_dag.py", home / "dags")
    shutil.copy(HERE / "backfill_batch_dag.py", home / "dags")
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
        # the backfill DAG (its run file and days are written by the test)
        "ASSAY_BACKFILL_RUN_FILE": str(work / "backfill" / "run.yaml"),
        "ASSAY_BACKFILL_BATCH_RUN_FILE": str(work / "backfill_batch" / "run.yaml"),
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


def test_backfill_dag_scores_a_range_of_days_then_only_what_is_missing(airflow: Airflow) -> None:
    """``AssayBackfillOperator`` under a real Airflow: three days scored in one task, its XCom the
    ``_BACKFILL.json``; a later run of the DAG, with late traces on one day, scores exactly those."""
    run_file = Path(airflow.env["ASSAY_BACKFILL_RUN_FILE"])
    root = run_file.parent
    (root / "in").mkdir(parents=True)
    lines = (REPO / "examples" / "quickstart" / "traces.jsonl").read_text().splitlines(keepends=True)
    good = [line for line in lines if _parses(line)][:12]
    days = ["2026-11-19", "2026-11-20", "2026-11-21"]
    for day in days:
        (root / "in" / f"{day}.jsonl").write_text("".join(good[:10]))
    run_file.write_text(
        json.dumps(
            {
                "source": {"path": str(root / "in" / "{{ ds }}.jsonl")},
                "evaluators": ["trajectory_match:mode=unordered", "tool_call_accuracy"],
                "sink": {"path": str(root / "out" / "dt={{ ds }}") + "/"},
                "state_dir": str(root / "state"),
            }
        )
    )
    airflow.run("dags", "test", "assay_backfill", "2026-11-22")
    assert airflow.states("assay_backfill") == {("backfill", -1): ("success", 1)}
    first = airflow.xcom("assay_backfill", "backfill")
    assert [d["ds"] for d in first["days"]] == days and first["exit_code"] == 0
    scored = {d["ds"]: d["pairs"]["scored"] for d in first["days"]}
    assert scored == dict.fromkeys(days, 20)  # 10 traces x 2 keys a day
    for day in days:
        assert (root / "out" / f"dt={day}" / "_SUCCESS").exists()
    before = {day: (root / "out" / f"dt={day}" / "_SUMMARY.json").read_bytes() for day in days}
    (root / "in" / "2026-11-20.jsonl").write_text("".join(good[:12]))  # two late traces on one day
    airflow.run("dags", "test", "assay_backfill", "2026-11-23")
    assert airflow.states("assay_backfill") == {("backfill", -1): ("success", 1)}
    rows = airflow.query(
        "SELECT x.value FROM xcom x JOIN dag_run r ON x.run_id = r.run_id AND x.dag_id = r.dag_id"
        " WHERE x.dag_id = 'assay_backfill' AND x.task_id = 'backfill' AND x.key = 'return_value'"
        " ORDER BY r.logical_date DESC LIMIT 1"
    )
    again = json.loads(rows[0][0] if isinstance(rows[0][0], str) else rows[0][0].decode())
    assert {d["ds"]: d["pairs"]["scored"] for d in again["days"]} == {days[0]: 0, days[1]: 4, days[2]: 0}
    assert again["exit_code"] == 0
    for day in (days[0], days[2]):  # days with nothing missing are left as they were
        assert (root / "out" / f"dt={day}" / "_SUMMARY.json").read_bytes() == before[day]


def test_deferrable_backfill_defers_while_batches_are_pending_then_collects(airflow: Airflow) -> None:
    """``AssayBackfillOperator(deferrable=True)`` over two days whose judge is in batch mode: the
    first invocation puts both days' lines in one provider batch and exits 75, the task defers (no
    worker slot held), then the same command collects and scores both days; no line is submitted
    twice and no real-time call is made."""
    from assay.testing.batch_server import BatchServerThread

    run = Path(airflow.env["ASSAY_BACKFILL_BATCH_RUN_FILE"])
    root = run.parent
    (root / "in").mkdir(parents=True, exist_ok=True)
    days = ["2026-11-20", "2026-11-21"]
    for day in days:
        rows = [
            {"id": f"{day}-t{i}", "inputs": f"q {day} {i}", "outputs": f"a {i}", "reference_outputs": f"a {i}"}
            for i in range(20)
        ]
        (root / "in" / f"{day}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with BatchServerThread(delay=(2.0, 3.0), seed=4) as server:
        run.write_text(
            json.dumps(
                {
                    "source": {"path": str(root / "in" / "{{ ds }}.jsonl")},
                    "state_dir": str(root / "state"),
                    "judges": {
                        "gpt": {
                            "provider": "openai",
                            "base_url": f"{server.url}/v1",
                            "model": "judge-1",
                            "mode": "batch",
                            "batch": {"max_requests": 50, "poll_interval_s": 0.2},
                        }
                    },
                    "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}],
                    "sink": {"path": str(root / "out" / "dt={{ ds }}") + "/"},
                }
            )
        )
        result = airflow.run("dags", "test", "assay_backfill_batch", "2026-11-22")
        stats = server.stats
        assert stats.batches == 1 and len(stats.submissions) == 40  # both days' lines in one batch
        assert set(stats.submissions.values()) == {1}  # each line submitted once: the rerun collected
        assert server.server.judge.stats.requests == 0  # no real-time call
    assert airflow.states("assay_backfill_batch") == {("backfill", -1): ("success", 1)}
    summary = airflow.xcom("assay_backfill_batch", "backfill")
    assert summary["exit_code"] == 0 and [d["pairs"]["scored"] for d in summary["days"]] == [20, 20]
    for day in days:
        assert (root / "out" / f"dt={day}" / "_SUCCESS").exists()
    logs = "\n".join(p.read_text(errors="replace") for p in (airflow.home / "logs").rglob("*.log"))
    logs += result.stdout + result.stderr
    assert "deferring, the task checks again" in logs


def _parses(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


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
        ("exit_5", -1): ("failed", 1),  # budget: no retry (a retry under the same cap stops at once)
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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveAirflow:
    """A real Airflow deployment in one AIRFLOW_HOME: api-server, scheduler (LocalExecutor),
    dag-processor and triggerer as separate processes, each with its own environment."""

    def __init__(self, airflow: Path, home: Path, env: dict[str, str]) -> None:
        self.cli = Airflow(airflow, home, env)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, component: str, env: dict[str, str]) -> None:
        log = open(self.cli.home / f"{component}.out", "wb")  # noqa: SIM115 - closed with the process
        self.procs[component] = subprocess.Popen(
            [str(self.cli.airflow), component], env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def wait_for(self, what: str, check: Any, timeout: float = 300.0) -> Any:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    out = (self.cli.home / f"{name}.out").read_text(errors="replace")[-3000:]
                    pytest.fail(f"airflow {name} exited {proc.returncode} while waiting for {what}:\n{out}")
            value = check()
            if value:
                return value
            time.sleep(1.0)
        outs = {n: (self.cli.home / f"{n}.out").read_text(errors="replace")[-1500:] for n in self.procs}
        pytest.fail(f"timed out waiting for {what}: {outs}")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


SECRET_NAMES = ("BATCH_API_KEY", "OTHER_API_KEY", "ASSAY_OUT")


def test_deferrable_trigger_polls_with_the_operators_env_under_a_real_scheduler_and_triggerer(
    airflow_bin: Path, airflow: Airflow, tmp_path: Path
) -> None:
    """The run file's ``${ASSAY_OUT}`` and the judge key exist only in the operator's ``env=`` (the
    key from an Airflow Variable). The trigger polls in the triggerer with the task's non-secret
    values (paths) and its own ``BATCH_API_KEY`` (the same name, as a deployment provides it); a
    key the triggerer lacks (``OTHER_API_KEY``) makes the task check instead. No key is written
    into a serialized trigger, the provider never answers 401, each line is submitted once."""
    from assay.testing.batch_server import BatchServerThread

    key = "sk-assay-airflow-secret"
    root = tmp_path / "runs"
    root.mkdir()
    for name in ("polled", "checked"):  # the two runs ask different questions: their batch lines differ
        (root / f"{name}.jsonl").write_text(
            "".join(
                json.dumps({"id": f"t{i}", "inputs": f"{name} {i}", "outputs": f"a {i}", "reference_outputs": f"a {i}"})
                + "\n"
                for i in range(20)
            )
        )
    home = tmp_path / "airflow_home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(HERE / "batch_env_dag.py", home / "dags")
    port = _free_port()
    fernet = pytest.importorskip("cryptography.fernet")
    fernet_key = fernet.Fernet.generate_key().decode()
    base = {k: v for k, v in os.environ.items() if k not in SECRET_NAMES}
    base.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__FERNET_KEY": fernet_key,  # trigger kwargs are stored encrypted: the test reads them
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "ASSAY_ENV_DIR": str(root),
        }
    )
    live = LiveAirflow(airflow_bin, home, base)
    with BatchServerThread(delay=(3.0, 4.0), seed=5, api_key=key) as server:
        for name, key_env in (("polled", "BATCH_API_KEY"), ("checked", "OTHER_API_KEY")):
            (root / f"{name}.yaml").write_text(
                json.dumps(
                    {
                        "source": {"path": str(root / f"{name}.jsonl")},
                        "state_dir": "${ASSAY_OUT}/state",
                        "judges": {
                            "gpt": {
                                "provider": "openai",
                                "base_url": f"{server.url}/v1",
                                "model": "judge-1",
                                "api_key_env": key_env,
                                "mode": "batch",
                                "batch": {"max_requests": 10, "poll_interval_s": 0.2},
                            }
                        },
                        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}],
                        "sink": {"path": "${ASSAY_OUT}/out/"},
                    }
                )
            )
        # a copy of the module's migrated database (the same schema): a second `db migrate` cost ~25 s
        shutil.copy(airflow.home / "airflow.db", home / "airflow.db")
        live.cli.run("variables", "set", "batch_key", key)
        try:
            live.start("api-server", base)
            live.start("scheduler", base)
            live.start("dag-processor", base)
            live.start("triggerer", {**base, "BATCH_API_KEY": key})  # a deployment's key, not OTHER_API_KEY
            live.wait_for(
                "the DAG to be parsed", lambda: live.cli.query("SELECT 1 FROM dag WHERE dag_id = 'assay_batch_env'")
            )
            live.cli.run("dags", "unpause", "assay_batch_env")
            live.cli.run("dags", "trigger", "assay_batch_env")
            kwargs_seen: list[str] = []

            def decrypt(stored: str) -> str:
                return stored if stored.startswith("{") else fernet.Fernet(fernet_key).decrypt(stored.encode()).decode()

            def done() -> bool:
                kwargs_seen.extend(decrypt(k) for (k,) in live.cli.query("SELECT kwargs FROM trigger"))
                states = {
                    s for (s,) in live.cli.query("SELECT state FROM task_instance WHERE dag_id = 'assay_batch_env'")
                }
                return bool(states) and states <= {"success", "failed", "upstream_failed"}

            live.wait_for("both tasks to finish", done, timeout=600)
        finally:
            live.stop()
        stats = server.stats
        assert stats.unauthorized == 0  # no poll with a wrong or missing key
        assert len(stats.submissions) == 40 and set(stats.submissions.values()) == {1}
        assert server.server.judge.stats.requests == 0
    states = live.cli.states("assay_batch_env")
    logs = "\n".join(p.read_text(errors="replace") for p in (home / "logs").rglob("*.log"))
    logs += (home / "triggerer.out").read_text(errors="replace")
    assert states == {("polled", -1): ("success", 1), ("checked", -1): ("success", 1)}, logs[-6000:]
    for name in ("polled", "checked"):
        out = root / name / "out"
        assert (out / "_SUCCESS").exists()
        rows = [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]
        assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(20))
    assert "assay batches finished:" in logs  # the triggerer polled `polled`'s batches itself
    assert "OTHER_API_KEY not in the triggerer's environment (never serialized)" in logs
    assert kwargs_seen and not any(key in k for k in kwargs_seen)  # the key never in a serialized trigger
    assert any(str(root / "polled") in k for k in kwargs_seen)  # the path did travel


def test_nightly_dag_shards_then_merges_into_a_delta_table(airflow: Airflow, tmp_path: Path) -> None:
    """The shipped DAG with a Delta sink: the mapped shards stage their rows, the merge commits
    the day once (one row per trace, one commit)."""
    from deltalake import DeltaTable

    example = (REPO / "examples" / "airflow" / "nightly.yaml").read_text()
    source = REPO / "examples" / "quickstart" / "traces.jsonl"
    table = tmp_path / "lake" / "scores"
    run_file = tmp_path / "nightly-delta.yaml"
    run_file.write_text(
        example.replace("path: ../quickstart/traces.jsonl", f"path: {source}").replace(
            "path: ${ASSAY_RESULTS_DIR:-results}/dt={{ ds }}/", f"type: delta\n  path: {table}"
        )
    )
    assert "type: delta" in run_file.read_text()
    delta = Airflow(airflow.airflow, airflow.home, {**airflow.env, "ASSAY_RUN_FILE": str(run_file)})
    delta.run("dags", "reserialize")
    delta.run("dags", "test", "assay_nightly", "2026-11-25")
    states = {k: v for k, v in delta.states("assay_nightly").items() if v[0] != "removed"}
    assert set(states.values()) == {("success", 1)}, states
    dt = DeltaTable(str(table))
    assert dt.version() == 0  # one commit: the merge's
    rows = dt.to_pyarrow_table().to_pylist()
    assert {r["ds"] for r in rows} == {"2026-11-24"}
    ids = [r["trace_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 41  # the quickstart's 43 lines: 41 traces, 2 dead letters
    summary = json.loads((table / "_summaries" / "ds=2026-11-24" / "_SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["shards"]["present"] == [0, 1] and summary["delta"]["version"] == 0
