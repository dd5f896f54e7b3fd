"""The platform API sources (``source: {type: langsmith | langfuse | phoenix}``) against the strict
stand-ins (read with the official ``langsmith`` and ``langfuse`` clients too) and a real Phoenix
server: every trace of the window once, the same canonical trace as the export readers make of
the same rows, resumed after a kill without re-reading what is durable, 429s waited out, a
wrong key one clear line."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.connectors.api_source import ApiTraceSource
from assay.connectors.exports import AssembleExports
from assay.connectors.langfuse_api import LangfuseApiSource, LangfuseSourceConfig
from assay.connectors.langsmith_api import LangSmithApiSource, LangSmithSourceConfig
from assay.connectors.phoenix_api import PhoenixApiSource, PhoenixSourceConfig
from assay.exceptions import ConnectorError
from assay.records import Envelope
from assay.testing import ListSource
from assay.testing.langfuse_server import LangfuseServerThread
from assay.testing.langsmith_server import LangSmithServerThread
from tests.support.exports import traces_by_id
from tests.support.sdk_exports import langfuse_blob_export, langsmith_sdk_export, list_runs_lines

KEYS = {"LANGSMITH_API_KEY": "ls-key", "LANGFUSE_PUBLIC_KEY": "pk-lf", "LANGFUSE_SECRET_KEY": "sk-lf"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)


def read_all(source: ApiTraceSource, *, ack: bool = True, stop_after: int | None = None) -> list[Envelope]:
    """The source's records, acknowledged batch by batch; ``stop_after`` batches, then a kill
    (the source dropped without an end)."""

    async def go() -> list[Envelope]:
        out: list[Envelope] = []
        n = 0
        async for batch in source.batches():
            out.extend(batch)
            if ack:
                await source.ack([e.position for e in batch])
            n += 1
            if stop_after is not None and n >= stop_after:
                break
        await source.aclose()
        return out

    return anyio.run(go)


def export_traces(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The traces the export reader makes of the same rows (shuffled: an export's order)."""
    rows = list(rows)
    random.Random(7).shuffle(rows)

    async def go() -> list[Envelope]:
        async with AssembleExports(ListSource(rows)) as src:
            return [e async for b in src.batches() for e in b]

    return traces_by_id(anyio.run(go))


# -- LangSmith ---------------------------------------------------------------------------------


def _runs(n: int) -> tuple[list[dict[str, Any]], dt.datetime, dt.datetime]:
    rows, _ = langsmith_sdk_export(n, seed=3)
    runs = [json.loads(line) for line in list_runs_lines(rows)]
    starts = [dt.datetime.fromisoformat(r["start_time"]) for r in runs]
    return runs, min(starts) - dt.timedelta(seconds=1), max(starts) + dt.timedelta(seconds=1)


@pytest.fixture
def langsmith() -> Iterator[tuple[LangSmithServerThread, list[dict[str, Any]], dt.datetime, dt.datetime]]:
    runs, start, end = _runs(9)
    with LangSmithServerThread(api_key="ls-key", runs=set()) as s:
        s.server.load_runs("agents", runs, project_id=runs[0]["session_id"])
        s.server.load_runs("other", [])
        yield s, runs, start, end


def ls_source(url: str, start: dt.datetime, end: dt.datetime, resume: Any = None, **kw: Any) -> LangSmithApiSource:
    cfg = LangSmithSourceConfig(api_url=url, project="agents", start=start, end=end, retries=3, **kw)
    return LangSmithApiSource(cfg, batch_size=2, resume_state=resume)


# ``list_runs`` (``POST /runs/query``, the endpoint the source reads) is deprecated in favour of the
# SmithDB ``/v2/runs/query`` after January 2027; it is the documented classic path until then
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_langsmith_stand_in_answers_the_official_client(langsmith: Any) -> None:
    from langsmith import Client

    s, runs, start, _ = langsmith
    client = Client(api_url=s.url, api_key="ls-key", auto_batch_tracing=False)
    roots = list(client.list_runs(project_name="agents", is_root=True, start_time=start))
    want_roots = {r["id"] for r in runs if r["parent_run_id"] is None}
    assert {str(r.id) for r in roots} == want_roots and len(roots) == 9
    one = next(iter(want_roots))
    got = list(client.list_runs(project_name="agents", trace_id=one))
    assert sorted(str(r.id) for r in got) == sorted(r["id"] for r in runs if r["trace_id"] == one)
    assert {r.name for r in got} == {r["name"] for r in runs if r["trace_id"] == one}
    assert list(client.list_runs(project_name="other")) == []


def test_langsmith_source_reads_each_trace_once_as_the_export_reader_does(langsmith: Any) -> None:
    s, runs, start, end = langsmith
    envs = read_all(ls_source(s.url, start, end, page_size=4))
    api = traces_by_id(envs)
    exported = export_traces(runs)
    assert sorted(api) == sorted(exported) and len(api) == 9
    for tid, trace in exported.items():
        assert api[tid] == trace, tid
    # positions are the window's order: 0..8, each once
    assert sorted(e.position.line for e in envs) == list(range(9))
    # one listing request per page of 4 roots (3), one query per trace (9)
    queries = s.server.queries
    assert sum(1 for q in queries if q.get("is_root")) == 3
    assert sum(1 for q in queries if q.get("trace")) == 9


def test_langsmith_source_window_keeps_only_traces_starting_in_it(langsmith: Any) -> None:
    s, runs, start, _ = langsmith
    roots = sorted((r for r in runs if r["parent_run_id"] is None), key=lambda r: r["start_time"])
    cut = dt.datetime.fromisoformat(roots[4]["start_time"])
    envs = read_all(ls_source(s.url, start, cut))
    assert sorted(traces_by_id(envs)) == sorted(r["trace_id"] for r in roots[:4])


def test_langsmith_source_resumes_after_a_kill_without_rereading_durable_traces(langsmith: Any) -> None:
    s, _, start, end = langsmith
    first = ls_source(s.url, start, end, page_size=3)
    # batches of 2: [0, 1] [2] (page 1 whole) [3, 4] (of page 2) acknowledged, then killed
    got = read_all(first, stop_after=3)
    state = json.loads(json.dumps(first.snapshot()))  # the checkpoint, as saved
    assert len(got) == 5 and state["base"] == 3 and state["acked"] == [3, 4]
    before = len(s.server.queries)
    rest = read_all(ls_source(s.url, start, end, resume=state, page_size=3))
    assert sorted(e.position.line for e in got + rest) == list(range(9))
    assert {e.position.line for e in got} & {e.position.line for e in rest} == set()
    # the resumed run listed from the second page and fetched only the 4 traces not yet durable
    new = s.server.queries[before:]
    assert sum(1 for q in new if q.get("trace")) == 4
    assert sum(1 for q in new if q.get("is_root")) == 2
    # finished: a third run reads nothing and asks nothing
    done = ls_source(s.url, start, end, page_size=3, resume=state)
    read_all(done)
    after = len(s.server.queries)
    again = ls_source(s.url, start, end, page_size=3, resume=done.snapshot())
    assert read_all(again) == [] and len(s.server.queries) == after


def test_langsmith_source_shards_split_the_traces(langsmith: Any) -> None:
    """``--workers 2``: each writer lists every page and fetches only the traces hashed to it."""
    s, _, start, end = langsmith
    cfg = LangSmithSourceConfig(api_url=s.url, project="agents", start=start, end=end, page_size=4)
    halves = [read_all(LangSmithApiSource(cfg, shard=(i, 2))) for i in range(2)]
    ids = [set(traces_by_id(h)) for h in halves]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    assert sorted(ids[0] | ids[1]) == sorted(traces_by_id(read_all(LangSmithApiSource(cfg))))
    assert sum(1 for q in s.server.queries if q.get("trace")) == 9 * 2  # 9 fetched by the shards, 9 whole


def test_langsmith_source_waits_out_429s_and_a_wrong_key_is_one_line(langsmith: Any) -> None:
    s, _, start, end = langsmith
    s.server.read_rate_limit_first, s.server.retry_after = 3, 0.05
    src = ls_source(s.url, start, end)
    assert len(read_all(src)) == 9
    assert s.server.stats.read_rate_limited == 3
    assert src.stats_client is not None and src.stats_client.stats.rate_limited == 3
    # 503s are retried (backing off), up to the source's retries, then one line naming the answer
    s.server.read_fail_first = 2
    assert len(read_all(ls_source(s.url, start, end))) == 9
    s.server.read_fail_first = 10
    with pytest.raises(ConnectorError, match="failed after 1 retries: 503"):
        read_all(
            LangSmithApiSource(LangSmithSourceConfig(api_url=s.url, project="agents", start=start, end=end, retries=1))
        )
    s.server.read_fail_first = 0
    os.environ["LANGSMITH_API_KEY"] = "wrong"
    with pytest.raises(ConnectorError) as err:
        read_all(ls_source(s.url, start, end))
    assert "401 unauthorized" in str(err.value) and "LANGSMITH_API_KEY" in str(err.value)
    assert "wrong" not in str(err.value)


# -- Langfuse ----------------------------------------------------------------------------------

_API = {
    "trace_id": "traceId",
    "parent_observation_id": "parentObservationId",
    "start_time": "startTime",
    "end_time": "endTime",
    "status_message": "statusMessage",
    "usage_details": "usageDetails",
    "cost_details": "costDetails",
    "total_cost": "totalCost",
    "provided_model_name": "model",
    "trace_name": "traceName",
    "user_id": "userId",
    "session_id": "sessionId",
}


def api_observation(row: dict[str, Any]) -> dict[str, Any]:
    """An ``observations_v2/`` export row as the v2 API returns it (the same data model): camelCase,
    times in ISO 8601, ``input`` / ``output`` the same raw JSON text, no parent for a root."""
    out = {_API.get(k, k): v for k, v in row.items() if k != "is_root_observation"}
    for k in ("startTime", "endTime"):
        if isinstance(out.get(k), dt.datetime):
            out[k] = out[k].isoformat().replace("+00:00", "Z")
    out["parentObservationId"] = out.get("parentObservationId") or None
    out["isRootObservation"] = out["parentObservationId"] is None
    return out


@pytest.fixture
def langfuse() -> Iterator[tuple[LangfuseServerThread, list[dict[str, Any]]]]:
    observations, _traces, _ = langfuse_blob_export(8, seed=5)
    with LangfuseServerThread(public_key="pk-lf", secret_key="sk-lf", traces=set()) as s:
        s.server.load_observations(api_observation(o) for o in observations)
        yield s, observations


def lf_source(url: str, resume: Any = None, **kw: Any) -> LangfuseApiSource:
    kw.setdefault("rpm", 60_000)  # the stand-in has no limit of its own unless asked
    cfg = LangfuseSourceConfig(host=url, ds="2026-11-21", retries=3, **kw)
    return LangfuseApiSource(cfg, batch_size=3, resume_state=resume)


def test_langfuse_stand_in_answers_the_official_client(langfuse: Any) -> None:
    from langfuse.api.client import LangfuseAPI

    s, observations = langfuse
    api = LangfuseAPI(base_url=s.url, username="pk-lf", password="sk-lf")
    roots = api.observations.get_many(is_root_observation=True, limit=100)
    assert len(roots.data) == 8 and roots.meta.cursor is None
    tid = roots.data[0].trace_id
    rows = api.observations.get_many(trace_id=tid, fields="core,basic,io", limit=2)
    want = [o for o in observations if o["trace_id"] == tid]
    got = list(rows.data)
    while rows.meta.cursor:
        rows = api.observations.get_many(trace_id=tid, fields="core,basic,io", limit=2, cursor=rows.meta.cursor)
        got.extend(rows.data)
    assert sorted(o.id for o in got) == sorted(o["id"] for o in want)
    assert sorted((o.id, o.input) for o in got) == sorted((o["id"], o["input"]) for o in want)


def test_langfuse_source_reads_each_trace_once_as_the_export_reader_does(langfuse: Any) -> None:
    s, observations = langfuse
    src = lf_source(s.url, page_size=3)
    envs = read_all(src)
    api = traces_by_id(envs)
    exported = export_traces(observations)
    assert sorted(api) == sorted(exported) and len(api) == 8
    for tid, trace in exported.items():
        assert api[tid] == trace, tid
    # 3 listing pages of roots, one observations read per trace; the window is the ds day
    reads = s.server.reads_log
    assert sum(1 for q in reads if q.get("isRootObservation") == "true") == 3
    assert sum(1 for q in reads if "traceId" in q) == 8
    assert {q.get("fromStartTime") for q in reads if "isRootObservation" in q} == {"2026-11-21T00:00:00Z"}
    # another day holds none of them
    assert read_all(LangfuseApiSource(LangfuseSourceConfig(host=s.url, ds="2026-11-22", rpm=6000))) == []


def test_langfuse_source_paces_resumes_and_reports_429s(langfuse: Any) -> None:
    s, _obs = langfuse
    s.server.read_rate_limit_first, s.server.retry_after = 2, 0.05
    first = lf_source(s.url, page_size=3, rpm=None)  # the default pace: 30 requests/min
    got = read_all(first, stop_after=1)
    state = first.snapshot()
    rest = read_all(lf_source(s.url, resume=state, page_size=3))
    assert sorted(e.position.line for e in got + rest) == list(range(8))
    assert s.server.stats.read_rate_limited == 2
    assert "30 requests/min" in LangfuseApiSource(LangfuseSourceConfig(host=s.url, ds="2026-11-21")).describe()
    # the progress line's part: requests, 429s, and the small default limit said out loud
    note = first.progress_note()
    assert "6 requests" in note and "2 rate limited (429)" in note  # 2 refused, a listing, 3 traces
    assert "at most 30 req/min" in note and "as little as 30" in note
    paced = lf_source(s.url, rpm=600)
    read_all(paced)
    assert "at most 600 req/min" in paced.progress_note() and "as little as" not in paced.progress_note()


def test_langfuse_wrong_key_is_one_line(langfuse: Any) -> None:
    s, _obs = langfuse
    os.environ["LANGFUSE_SECRET_KEY"] = "nope"
    with pytest.raises(ConnectorError, match=r"401 unauthorized.*LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY"):
        read_all(lf_source(s.url))


# -- the CLI: a night read from LangSmith and pushed back ------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **KEYS},
        cwd=cwd,
    )


@pytest.mark.parametrize("sink", ["{path: out/}", "{path: out/, format: parquet}"])
def test_run_reads_langsmith_and_pushes_feedback_once_per_trace(tmp_path: Path, langsmith: Any, sink: str) -> None:
    """From JSON lines or from Parquet (its ``platform`` column), feedback lands on each root run."""
    s, runs, start, end = langsmith
    run = tmp_path / "run.yaml"
    run.write_text(
        f"""source: {{type: langsmith, api_url: "{s.url}", project: agents, start: "{start.isoformat()}",
          end: "{end.isoformat()}", page_size: 4}}
evaluators:
  - name: max_turns
    params: {{max_turns: 50}}
sink: {sink}
push:
  - {{type: langsmith, api_url: "{s.url}", retries: 2}}
"""
    )
    done = cli("run", str(run), "--ds", "2026-11-21", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["push"]["langsmith"]["delivered"] == 9
    roots = {r["id"] for r in runs if r["parent_run_id"] is None}
    assert {f["run_id"] for f in s.server.feedback.values()} == roots
    # the project's id came with each trace (platform.session_id), through JSON lines or Parquet
    assert {f["session_id"] for f in s.server.feedback.values()} == {s.server.projects["agents"]}
    assert len(s.server.feedback) == 9 and s.server.stats.duplicates == 0
    # a wrong key for the source: one line naming it, no traceback
    bad = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(run), "--ds", "2026-11-21", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **KEYS, "LANGSMITH_API_KEY": "wrong"},
        cwd=tmp_path,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "unauthorized (check LANGSMITH_API_KEY)" in bad.stderr


# -- Phoenix: a real server ---------------------------------------------------------------------


def load_agent_traces(url: str, project: str, n: int, seed: int) -> dict[str, str]:
    """``n`` traces of an agent root span with a chat span and a tool span under it, sent with the
    OpenTelemetry SDK; returns trace id -> root span id."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    r = random.Random(seed)
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces")))
    tracer = provider.get_tracer("assay-tests")
    roots: dict[str, str] = {}
    for t in range(n):
        city = r.choice(["Paris", "Oslo", "Lima"])
        with tracer.start_as_current_span("invoke_agent weather") as root:
            root.set_attribute("gen_ai.operation.name", "invoke_agent")
            ctx = root.get_span_context()
            roots[f"{ctx.trace_id:032x}"] = f"{ctx.span_id:016x}"
            with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute(
                    "gen_ai.input.messages",
                    json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"weather in {city}? ({t})"}]}]),
                )
                chat.set_attribute(
                    "gen_ai.output.messages",
                    json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"sunny in {city}"}]}]),
                )
                chat.set_attribute("gen_ai.usage.input_tokens", 12)
                chat.set_attribute("gen_ai.usage.output_tokens", 4)
    provider.shutdown()
    return roots


@pytest.mark.xdist_group("phoenix")  # one worker starts the one Phoenix server (~25 s)
def test_phoenix_source_then_push_is_a_nightly_loop_on_a_real_server(tmp_path: Path, phoenix_server: Any) -> None:
    project = f"loop-{uuid.uuid4().hex[:8]}"
    roots = load_agent_traces(phoenix_server.url, project, 7, seed=11)
    import time

    deadline = time.monotonic() + 60
    while len(phoenix_server.spans(project)) < 14 and time.monotonic() < deadline:
        time.sleep(0.5)
    day = dt.datetime.now(dt.UTC).date()
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC) - dt.timedelta(days=1)
    end = start + dt.timedelta(days=3)

    src = PhoenixApiSource(
        PhoenixSourceConfig(endpoint=phoenix_server.url, project=project, start=start, end=end, page_size=3),
        batch_size=4,
    )
    envs = read_all(src)
    traces = traces_by_id(envs)
    assert sorted(traces) == sorted(roots)
    for tid, trace in traces.items():
        assert trace.format == "otel" and trace.metadata["root_span_id"] == roots[tid]
        assert trace.final_output is not None and "sunny in" in str(trace.final_output)
    # a project Phoenix does not have: one line naming it
    with pytest.raises(ConnectorError, match="no project 'nope'"):
        read_all(PhoenixApiSource(PhoenixSourceConfig(endpoint=phoenix_server.url, project="nope", ds=str(day))))

    # the loop: source phoenix + push phoenix, no file of the user's own
    run = tmp_path / "run.yaml"
    run.write_text(
        f"""source: {{type: phoenix, endpoint: "{phoenix_server.url}", project: {project},
          start: "{start.isoformat()}", end: "{end.isoformat()}"}}
evaluators:
  - name: contains
    params: {{substring: sunny}}
sink: {{path: out/}}
push:
  - {{type: phoenix, endpoint: "{phoenix_server.url}", project: {project}, retries: 2}}
"""
    )
    done = cli("run", str(run), "--ds", str(day), "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    section = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())["push"]["phoenix"]
    assert (section["delivered"], section["rejected"], section["status"]) == (7, 0, "ok")
    got = phoenix_server.annotations(project, list(roots.values()))
    assert sorted(a["span_id"] for a in got) == sorted(roots.values())
    assert {a["name"] for a in got} == {"contains"} and {a["result"]["label"] for a in got} == {"pass"}
    # the same night again: nothing new on Phoenix
    assert cli("run", str(run), "--ds", str(day), "-q", cwd=tmp_path).returncode == 0
    assert len(phoenix_server.annotations(project, list(roots.values()))) == 7


def test_kill_9_while_reading_langfuse_then_the_same_command_reads_only_what_is_left(tmp_path: Path) -> None:
    """A run killed while paging through the API resumes from its checkpoint: every trace once in
    the output, and the traces already written are not fetched again."""
    import signal
    import time

    from tests.support.runs import checkpointed_rows

    observations, _traces, _ = langfuse_blob_export(40, seed=9)
    with LangfuseServerThread(public_key="pk-lf", secret_key="sk-lf") as s:
        s.server.load_observations(api_observation(o) for o in observations)
        run = tmp_path / "run.yaml"
        run.write_text(
            f"""source: {{type: langfuse, host: "{s.url}", rpm: 300, page_size: 5}}
evaluators:
  - name: max_turns
    params: {{max_turns: 50}}
sink: {{path: out/}}
limits: {{commit_interval_s: 0.2, batch_size: 2}}
"""
        )
        cmd = [sys.executable, "-m", "assay.cli", "run", str(run), "--ds", "2026-11-21", "-q"]
        env = {**os.environ, **KEYS}
        started = time.time()
        proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while checkpointed_rows(tmp_path, started) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        durable = checkpointed_rows(tmp_path, started)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert 10 <= durable < 40
        assert not (tmp_path / "out" / "_SUCCESS").exists()
        before = sum(1 for q in s.server.reads_log if "traceId" in q)
        done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        rows = [
            json.loads(line)
            for p in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in p.read_text().splitlines()
        ]
        want = sorted({o["trace_id"] for o in observations})
        assert sorted(r["trace_id"] for r in rows) == want  # each trace once
        fetched_again = sum(1 for q in s.server.reads_log if "traceId" in q) - before
        assert fetched_again <= 40 - durable


def test_a_checkpoint_taken_once_the_last_page_is_written_reads_nothing_again(langsmith: Any) -> None:
    """The engine may save a checkpoint after the last page's traces are written but before the
    source has noticed it ended: that checkpoint says finished, never "start from the first page"."""
    s, _, start, end = langsmith
    src = ls_source(s.url, start, end, page_size=4)

    async def go() -> Any:
        states = []
        async for batch in src.batches():
            await src.ack([e.position for e in batch])
            states.append(json.loads(json.dumps(src.snapshot())))  # a commit after each batch
        return states

    states = anyio.run(go)
    assert states[-1]["finished"] and states[-1]["cursor"] is None and states[-1]["base"] == 9
    before = len(s.server.queries)
    assert read_all(ls_source(s.url, start, end, resume=states[-1], page_size=4)) == []
    assert len(s.server.queries) == before


def _status(method: str, url: str, headers: dict[str, str], body: Any = None) -> int:
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={**headers, "content-type": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_stand_ins_read_side_is_strict(langsmith: Any, langfuse: Any) -> None:
    ls, _, _, _ = langsmith
    pid = ls.server.projects["agents"]
    key = {"x-api-key": "ls-key"}
    query = ls.url + "/runs/query"
    assert _status("POST", query, key, {"session": [pid], "limit": 100}) == 200
    assert _status("POST", query, key, {"session": [pid], "limit": 101}) == 422
    assert _status("POST", query, key, {"session": [pid], "bogus": 1}) == 422
    assert _status("POST", query, key, {"session": [pid], "select": ["nope"]}) == 422
    assert _status("POST", query, key, {"limit": 10}) == 422  # no project
    assert _status("POST", query, key, {"session": [pid], "filter": 'has(tags, "x")'}) == 422
    assert _status("POST", query, {"x-api-key": "nope"}, {"session": [pid]}) == 401
    lf, _ = langfuse
    import base64

    auth = {"authorization": "Basic " + base64.b64encode(b"pk-lf:sk-lf").decode()}
    obs = lf.url + "/api/public/v2/observations"
    assert _status("GET", obs + "?limit=1000", auth) == 200
    assert _status("GET", obs + "?limit=1001", auth) == 400
    assert _status("GET", obs + "?parseIoAsJson=true", auth) == 400
    assert _status("GET", obs + "?fields=core,everything", auth) == 400
    assert _status("GET", obs + "?fromTimestamp=2026-11-21T00:00:00Z", auth) == 400  # a v1 name
    assert _status("GET", obs, {"authorization": "Basic eDp5"}) == 401
