"""``assay run`` + ``assay push`` against strict stand-ins of LangSmith and Langfuse and an OTLP
receiver, as a user runs them: every platform holds exactly one score per (trace, key, identity)
whatever reruns, kills and retries happened; nothing is pushed from an unpublished output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.push import push_id
from assay.testing.langfuse_server import LangfuseServerThread
from assay.testing.langsmith_server import LangSmithServerThread
from assay.testing.otlp_receiver import OtlpReceiverThread
from tests.support.push_corpus import write_corpus

pytest.importorskip("opentelemetry.proto")

DS = "2026-11-20"
KEYS = {"LANGSMITH_API_KEY": "ls-key", "LANGFUSE_PUBLIC_KEY": "pk-lf", "LANGFUSE_SECRET_KEY": "sk-lf"}


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **KEYS, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, timeout=300, env=full, cwd=cwd
    )


def write_run(tmp: Path, urls: dict[str, str], *, substring: str = "sunny", only: list[str] | None = None,
              extra: str = "") -> Path:  # fmt: skip
    targets = {
        "langsmith": f'{{type: langsmith, api_url: "{urls["langsmith"]}", retries: 2}}',
        "langfuse": f'{{type: langfuse, host: "{urls["langfuse"]}", retries: 2}}',
        "otel": f'{{type: otel, endpoint: "{urls["otel"]}", retries: 2}}',
    }
    chosen = [v for k, v in targets.items() if only is None or k in only]
    push = "\n".join(f"  - {t}" for t in chosen)
    run = tmp / "run.yaml"
    run.write_text(
        f"""source: {{path: traces.jsonl}}
evaluators:
  - name: contains
    params: {{substring: {substring}}}
  - name: latency
    params: {{max_s: 5}}
sink: {{path: out/}}
{extra}
push:
{push}
"""
    )
    return run


class Platforms:
    def __init__(self, ls: LangSmithServerThread, lf: LangfuseServerThread, ot: OtlpReceiverThread) -> None:
        self.ls, self.lf, self.ot = ls, lf, ot

    @property
    def urls(self) -> dict[str, str]:
        return {"langsmith": self.ls.url, "langfuse": self.lf.url, "otel": self.ot.url}


@pytest.fixture
def corpus(tmp_path: Path) -> list[tuple[str, str]]:
    return write_corpus(tmp_path / "traces.jsonl", 30)


def start(corpus: list[tuple[str, str]], *, known: int | None = None, **kw: Any) -> Platforms:
    """Stand-ins that know the first ``known`` traces (all by default)."""
    ids = [t for t, _ in corpus][: len(corpus) if known is None else known]
    ls = LangSmithServerThread(api_key="ls-key", runs=ids, rate_limit_first=3, **kw)
    lf = LangfuseServerThread(public_key="pk-lf", secret_key="sk-lf", traces=ids, max_batch=25, rate_limit_first=1)
    ot = OtlpReceiverThread(reject_traces=set([t for t, _ in corpus][len(ids) :]))
    for s in (ls, lf, ot):
        s.start()
    return Platforms(ls, lf, ot)


@pytest.fixture
def platforms(corpus: list[tuple[str, str]]) -> Iterator[Platforms]:
    p = start(corpus)
    yield p
    for s in (p.ls, p.lf, p.ot):
        s.stop()


def summary(tmp: Path) -> dict[str, Any]:
    return json.loads((tmp / "out" / "_SUMMARY.json").read_text())  # type: ignore[no-any-return]


def rows(tmp: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted((tmp / "out").glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def expected_ids(tmp: Path) -> set[str]:
    return {str(push_id(r["trace_id"], k, r["identity"][k])) for r in rows(tmp) for k in r["results"]}


def test_run_pushes_each_score_once_and_the_clients_read_them_back(
    tmp_path: Path, corpus: list[tuple[str, str]], platforms: Platforms
) -> None:
    run = write_run(tmp_path, platforms.urls)
    done = cli("run", str(run), "--ds", DS, "-q")
    assert done.returncode == 0, done.stderr
    push = summary(tmp_path)["push"]
    for name in ("langsmith", "langfuse", "otel"):
        assert push[name]["status"] == "ok"
        assert push[name]["delivered"] == 60 and push[name]["rejected"] == push[name]["not_sent"] == 0
    assert push["langsmith"]["rate_limited_429"] == 3  # Retry-After honoured, nothing lost
    want = expected_ids(tmp_path)
    ls, lf, ot = platforms.ls.server, platforms.lf.server, platforms.ot.server
    assert set(ls.feedback) == want and ls.stats.duplicates == 0
    assert {k[0] for k in lf.scores} == want and len(lf.scores) == 60
    assert {r["attributes"]["assay.evaluation.id"] for r in ot.records} == want and len(ot.records) == 60
    assert not ls.retention_extended  # extend_trace_retention: false by default
    # the rows carry the platform ids the OpenTelemetry normalizer kept
    row = rows(tmp_path)[0]
    assert row["platform"]["trace_id"] == row["trace_id"] and len(row["platform"]["root_id"]) == 16

    # what the official clients read back is what assay wrote
    from langsmith import Client

    client = Client(api_url=platforms.ls.url, api_key="ls-key")
    trace_id = corpus[0][0]
    got = {f.key: f for f in client.list_feedback(run_ids=[trace_id])}
    assert set(got) == {"contains", "latency"}
    assert got["contains"].score == 1.0 and got["contains"].run_id == uuid.UUID(trace_id)
    one = client.read_feedback(got["latency"].id)
    assert one.key == "latency" and one.feedback_source is not None and one.feedback_source.type == "model"

    from langfuse.api import LangfuseAPI

    api = LangfuseAPI(base_url=platforms.lf.url, username="pk-lf", password="sk-lf")
    page = api.scores.get_many(trace_id=trace_id, fields="details,subject")
    by_name = {s.name: s for s in page.data}
    assert set(by_name) == {"contains", "latency"}
    assert by_name["contains"].data_type == "BOOLEAN" and by_name["contains"].value is True
    assert by_name["contains"].timestamp.date().isoformat() == DS  # the stable day
    assert by_name["contains"].metadata == {"assay_identity": row["identity"]["contains"]}

    # a second push with nothing new sends nothing, and the summary still counts everything
    before = (ls.stats.requests, lf.stats.requests, ot.stats.requests)
    again = cli("push", str(run), "--ds", DS)
    assert again.returncode == 0, again.stderr
    assert (ls.stats.requests, lf.stats.requests, ot.stats.requests) == before
    assert "0 sent now" in again.stderr
    assert summary(tmp_path)["push"]["langfuse"]["delivered"] == 60


def test_a_forgotten_ledger_or_a_rerun_duplicates_nothing_and_a_changed_evaluator_adds_beside(
    tmp_path: Path, corpus: list[tuple[str, str]], platforms: Platforms
) -> None:
    run = write_run(tmp_path, platforms.urls)
    assert cli("run", str(run), "--ds", DS, "-q").returncode == 0
    ls, lf, ot = platforms.ls.server, platforms.lf.server, platforms.ot.server
    # the whole night again from scratch (the ledger lost: two Airflow retries at once look like this)
    for p in (tmp_path / ".assay" / "push").glob("*"):
        p.unlink()
    done = cli("run", str(run), "--ds", DS, "--fresh", "-q")
    assert done.returncode == 0, done.stderr
    assert len(ls.feedback) == 60 and ls.stats.duplicates == 60  # 409: already there
    assert summary(tmp_path)["push"]["langsmith"]["already_there"] == 60
    assert len(lf.scores) == 60 and lf.stats.duplicates == 60  # same id, name and day: updated in place
    # a changed evaluator: new scores beside the old ones, the unchanged one stays single
    old_ids = expected_ids(tmp_path)
    run = write_run(tmp_path, platforms.urls, substring="sun")
    assert cli("run", str(run), "--ds", DS, "-q").returncode == 0
    new_ids = expected_ids(tmp_path)
    assert len(new_ids - old_ids) == 30  # only the contains scores changed identity
    # the output was the ledger (issue 29): the latency results were kept, only contains was scored,
    # and only the new results were sent
    assert summary(tmp_path)["pairs"] == {"kept": 30, "scored": 30, "dropped": 0}
    assert {name: p["sent"] for name, p in summary(tmp_path)["push"].items()} == dict.fromkeys(
        ("langsmith", "langfuse", "otel"), 30
    )
    assert set(ls.feedback) == old_ids | new_ids and len(ls.feedback) == 90
    assert {k[0] for k in lf.scores} == old_ids | new_ids and len(lf.scores) == 90
    assert len({r["attributes"]["assay.evaluation.id"] for r in ot.records}) == 90


def test_rejected_traces_are_push_dead_letters_and_the_output_stands(
    tmp_path: Path, corpus: list[tuple[str, str]]
) -> None:
    p = start(corpus, known=25)  # the platforms do not know the last 5 traces
    try:
        run = write_run(tmp_path, p.urls)
        done = cli("run", str(run), "--ds", DS, "-q")
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "out" / "_SUCCESS").exists()
        push = summary(tmp_path)["push"]
        for name in ("langsmith", "langfuse", "otel"):
            assert (push[name]["delivered"], push[name]["rejected"]) == (50, 10), (name, push[name])
            dead = [
                json.loads(x)
                for x in (tmp_path / "out" / "_push_dead_letter" / f"{name}.jsonl").read_text().splitlines()
            ]
            assert len(dead) == 10 and all(d["message"] for d in dead)
            assert {d["trace_id"] for d in dead} == {t for t, _ in corpus[25:]}
        assert "not found" in (tmp_path / "out" / "_push_dead_letter" / "langsmith.jsonl").read_text()
        # a second push sends nothing again (rejections are remembered) and keeps the dead letters
        before = p.ls.server.stats.requests
        assert cli("push", str(run), "--ds", DS).returncode == 0
        assert p.ls.server.stats.requests == before
        assert summary(tmp_path)["push"]["langsmith"]["rejected"] == 10
    finally:
        for s in (p.ls, p.lf, p.ot):
            s.stop()


def test_a_wrong_key_exits_2_with_one_line_and_the_same_command_finishes(
    tmp_path: Path, corpus: list[tuple[str, str]], platforms: Platforms
) -> None:
    run = write_run(tmp_path, platforms.urls)
    done = cli("run", str(run), "--ds", DS, "-q", env={"LANGFUSE_SECRET_KEY": "wrong-secret"})
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("assay: error")]
    assert len(errors) == 1 and "push langfuse" in errors[0] and "HTTP 401" in errors[0]
    assert "wrong-secret" not in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "out" / "_SUCCESS").exists()  # the output stays published
    assert summary(tmp_path)["push"]["langfuse"]["status"] == "unauthorized"
    assert summary(tmp_path)["push"]["langsmith"]["status"] == "ok"  # the others went on
    fixed = cli("push", str(run), "--ds", DS, "--to", "langfuse")
    assert fixed.returncode == 0, fixed.stderr
    assert summary(tmp_path)["push"]["langfuse"]["status"] == "ok"
    assert summary(tmp_path)["push"]["langfuse"]["delivered"] == 60 and len(platforms.lf.server.scores) == 60


def test_an_unreachable_target_exits_1_and_nothing_is_pushed_from_an_unpublished_output(
    tmp_path: Path, corpus: list[tuple[str, str]], platforms: Platforms
) -> None:
    urls = {**platforms.urls, "otel": "http://127.0.0.1:9"}  # nothing listens there
    run = write_run(tmp_path, urls)
    done = cli("run", str(run), "--ds", DS, "-q")
    assert done.returncode == 1, done.stderr
    assert "push otel (http://127.0.0.1:9): unreachable" in done.stderr
    assert (tmp_path / "out" / "_SUCCESS").exists()
    # an output that is not published is never pushed
    (tmp_path / "out" / "_SUCCESS").unlink()
    before = platforms.ls.server.stats.requests
    refused = cli("push", str(run), "--ds", DS, "--to", "langsmith")
    assert refused.returncode == 1 and "not published" in refused.stderr
    assert platforms.ls.server.stats.requests == before


def test_a_failed_run_pushes_nothing(tmp_path: Path, corpus: list[tuple[str, str]], platforms: Platforms) -> None:
    with (tmp_path / "traces.jsonl").open("a") as f:
        f.write("not json\n")
    run = write_run(tmp_path, platforms.urls, extra="limits: {max_dead_letters: 0}")
    done = cli("run", str(run), "--ds", DS, "-q")
    assert done.returncode == 4, done.stderr
    assert platforms.ls.server.stats.requests == platforms.lf.server.stats.requests == 0
    assert platforms.ot.server.stats.requests == 0


def test_kill_9_during_the_push_then_the_same_command_leaves_one_score_each(
    tmp_path: Path, corpus: list[tuple[str, str]]
) -> None:
    write_corpus(tmp_path / "traces.jsonl", 150)
    ls = LangSmithServerThread(api_key="ls-key")
    ls.start()
    try:
        urls = {"langsmith": ls.url, "langfuse": "", "otel": ""}
        run = write_run(tmp_path, urls, only=["langsmith"])
        run.write_text(run.read_text().replace("retries: 2}", "retries: 2, rpm: 1800}"))  # 300 items: ~10 s
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay.cli", "run", str(run), "--ds", DS, "-q"],
            env={**os.environ, **KEYS},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while len(ls.server.feedback) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        partial = len(ls.server.feedback)
        assert 40 <= partial < 300
        assert (tmp_path / "out" / "_SUCCESS").exists()
        done = cli("push", str(run), "--ds", DS)
        assert done.returncode == 0, done.stderr
        assert set(ls.server.feedback) == expected_ids(tmp_path) and len(ls.server.feedback) == 300
        push = summary(tmp_path)["push"]["langsmith"]
        assert push["delivered"] + push["already_there"] == 300
        assert push["sent"] < 300 - partial + 80  # resumed: what the ledger had was not sent again
    finally:
        ls.stop()


@pytest.mark.xdist_group("phoenix")  # one worker starts the one Phoenix server (~25 s)
def test_phoenix_real_server_holds_one_annotation_per_trace_key_identity(
    tmp_path: Path, corpus: list[tuple[str, str]], phoenix_server: Any
) -> None:
    project = f"agents-{uuid.uuid4().hex[:8]}"
    phoenix_server.load_traces(project, corpus[:25])  # Phoenix does not know the last 5 traces
    run = tmp_path / "run.yaml"
    push = f'[{{type: phoenix, endpoint: "{phoenix_server.url}", project: {project}, retries: 2}}]'
    run.write_text(write_run(tmp_path, {"langsmith": "", "langfuse": "", "otel": ""}, only=[]).read_text()
                   .replace("push:\n", f"push: {push}\n"))  # fmt: skip
    done = cli("run", str(run), "--ds", DS, "-q")
    assert done.returncode == 0, done.stderr
    section = summary(tmp_path)["push"]["phoenix"]
    assert (section["delivered"], section["rejected"], section["status"]) == (50, 10, "ok")
    dead = (tmp_path / "out" / "_push_dead_letter" / "phoenix.jsonl").read_text()
    assert "do not exist" in dead
    spans = [s for _, s in corpus[:25]]

    def held() -> list[dict[str, Any]]:
        return phoenix_server.annotations(project, spans)  # type: ignore[no-any-return]

    got = held()
    assert len(got) == 50
    assert {(a["span_id"], a["name"]) for a in got} == {(s, k) for s in spans for k in ("contains", "latency")}
    one = next(a for a in got if a["name"] == "contains")
    assert one["annotator_kind"] == "CODE" and one["result"]["label"] == "pass" and one["result"]["score"] == 1.0
    # the ledger forgotten and the night pushed again: Phoenix upserts on the identifier
    for p in (tmp_path / ".assay" / "push").glob("*"):
        p.unlink()
    assert cli("push", str(run), "--ds", DS).returncode == 0
    assert len(held()) == 50
    # a changed evaluator: new annotations beside the old ones
    run.write_text(run.read_text().replace("substring: sunny", "substring: sun"))
    assert cli("run", str(run), "--ds", DS, "-q").returncode == 0
    got = held()
    assert len(got) == 75
    assert len({a["identifier"] for a in got if a["name"] == "contains"}) == 2


def test_validate_and_run_check_push_params_and_keys_before_anything_runs(
    tmp_path: Path, corpus: list[tuple[str, str]]
) -> None:
    run = write_run(tmp_path, {"langsmith": "http://127.0.0.1:9", "langfuse": "", "otel": ""}, only=["langsmith"])
    missing = cli("validate", str(run), env={"LANGSMITH_API_KEY": ""})
    assert missing.returncode == 2 and "push langsmith: LANGSMITH_API_KEY is not set" in missing.stderr
    run.write_text(run.read_text().replace("retries: 2", "retries: 2, extend_retention: true"))
    bad = cli("run", str(run), "--ds", DS)
    assert bad.returncode == 2 and "push[0].extend_retention: Extra inputs are not permitted" in bad.stderr
    assert not (tmp_path / "out").exists()  # nothing ran
