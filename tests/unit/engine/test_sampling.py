"""Evaluator sampling: membership by hash, strata minimums and weights, the counting pass, and the
evaluate stage leaving unsampled traces without a result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from assay.config import build_config
from assay.evaluators import TrajectoryMatch
from assay.evaluators.base import AsyncEvaluator, Evaluator, EvaluatorParams
from assay.exceptions import ConfigError
from assay.pipeline import Pipeline, RunOptions
from assay.records import Result
from assay.sampling import Sampler, SampleSpec, samplers_of
from assay.stages import EvaluateStage
from assay.stages.sampling import prepare_sampling
from assay.testing import ListSink, ListSource
from assay.traces.model import Trace
from tests.conftest import agent_messages


def traces(n: int, **meta: Any) -> list[Trace]:
    return [Trace(id=f"t{i}", metadata=dict(meta)) for i in range(n)]


def picked(sampler: Sampler, items: list[Trace]) -> set[str]:
    return {str(t.id) for t in items if sampler.weight(t) is not None}


def test_membership_is_a_stable_hash_of_id_key_and_seed() -> None:
    items = traces(10_000)
    a = picked(Sampler(SampleSpec(rate=0.1), "correctness"), items)
    assert 900 <= len(a) <= 1100
    assert a == picked(Sampler(SampleSpec(rate=0.1), "correctness"), list(reversed(items)))  # any order
    other_key = picked(Sampler(SampleSpec(rate=0.1), "helpfulness"), items)
    other_seed = picked(Sampler(SampleSpec(rate=0.1, seed=7), "correctness"), items)
    assert len(a & other_key) < 200 and len(a & other_seed) < 200  # independent draws (expected 100)
    assert a <= picked(Sampler(SampleSpec(rate=0.3), "correctness"), items)  # a larger rate adds traces
    assert {Sampler(SampleSpec(rate=0.1), "k").weight(t) for t in items} == {None, 10.0}


def test_by_a_session_keeps_a_session_together() -> None:
    items = [Trace(id=f"t{i}", metadata={"session": f"s{i % 50}"}) for i in range(1000)]
    sampler = Sampler(SampleSpec(rate=0.2, by="metadata.session"), "k")
    sessions_in = {t.metadata["session"] for t in items if sampler.weight(t) is not None}
    sessions_out = {t.metadata["session"] for t in items if sampler.weight(t) is None}
    assert sessions_in and sessions_out and not sessions_in & sessions_out


def test_a_trace_without_id_is_drawn_by_its_content() -> None:
    sampler = Sampler(SampleSpec(rate=0.5), "k")
    draws = {sampler.unit(Trace(input=f"q{i}")) for i in range(20)}
    assert len(draws) == 20 and sampler.unit(Trace(input="q1")) == sampler.unit(Trace(input="q1"))


def test_strata_minimums_and_weights() -> None:
    items = (
        [Trace(id=f"a{i}", metadata={"model": "big"}) for i in range(10_000)]
        + [Trace(id=f"b{i}", metadata={"model": "rare"}) for i in range(30)]
        + [Trace(id=f"c{i}", metadata={"model": "tiny"}) for i in range(3)]
        + [Trace(id=f"d{i}") for i in range(40)]  # no model: its own stratum
    )
    sampler = Sampler(SampleSpec(rate=0.01, strata="metadata.model", min_per_stratum=20), "k")
    with pytest.raises(RuntimeError, match="counting pass"):
        sampler.weight(items[0])
    for t in items:
        sampler.count(t)
    sampler.finish()
    assert sampler.populations == {"big": 10_000, "rare": 30, "tiny": 3, "(missing)": 40}
    by_stratum: dict[str, list[float]] = {}
    for t in items:
        w = sampler.weight(t)
        if w is not None:
            by_stratum.setdefault(sampler.stratum(t), []).append(w)
    assert 80 <= len(by_stratum["big"]) <= 120 and set(by_stratum["big"]) == {100.0}
    assert len(by_stratum["rare"]) == 20 and set(by_stratum["rare"]) == {1.5}
    assert len(by_stratum["tiny"]) == 3 and set(by_stratum["tiny"]) == {1.0}
    assert len(by_stratum["(missing)"]) == 20 and set(by_stratum["(missing)"]) == {2.0}
    # weights add up to about each stratum's size (an unbiased total)
    assert sum(by_stratum["rare"]) == 30 and abs(sum(by_stratum["big"]) - 10_000) < 2_000
    # the uniform sample of a stratum is part of the minimum-guaranteed one
    plain = Sampler(SampleSpec(rate=0.01), "k")
    assert picked(plain, items[:10_000]) <= picked(sampler, items[:10_000])


def test_spec_validation() -> None:
    with pytest.raises(ValidationError, match="min_per_stratum needs strata"):
        SampleSpec(rate=0.1, min_per_stratum=5)
    with pytest.raises(ValidationError):
        SampleSpec(rate=0.0)
    assert not SampleSpec(rate=1.0, strata="metadata.m", min_per_stratum=3).needs_counts


def test_strata_minimums_refused_for_an_endless_kafka_source() -> None:
    data = {
        "source": {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["t"], "group_id": "g"},
        "evaluators": [
            {"name": "exact_match", "sample": {"rate": 0.1, "strata": "metadata.model", "min_per_stratum": 5}}
        ],
        "sink": {"path": "out/"},
    }
    build_config(data)  # stop_at: end (the default) has an end to count to
    with pytest.raises(ConfigError, match=r"counting pass.*stop_at: never"):
        build_config({**data, "source": {**data["source"], "stop_at": "never"}})
    data["evaluators"][0]["sample"] = {"rate": 0.1}  # the rate alone needs no counting pass
    build_config({**data, "source": {**data["source"], "stop_at": "never"}})


def test_the_counting_pass_reads_the_whole_input(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = [f'{{"id": "t{i}", "outputs": "a", "metadata": {{"m": "{"x" if i % 10 else "y"}"}}}}' for i in range(200)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    config = build_config(
        {
            "source": {"path": str(tmp_path / "c.jsonl")},
            "evaluators": [
                {"name": "exact_match", "sample": {"rate": 0.05, "strata": "metadata.m", "min_per_stratum": 15}},
                {"name": "trajectory_match"},
            ],
            "sink": {"path": str(tmp_path / "out/")},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    from assay.pipeline.assembly import build_evaluators

    evaluators = build_evaluators(config)
    samplers = samplers_of(evaluators)  # build_evaluators gave the sampling evaluator its sampler
    assert list(samplers) == ["exact_match"]
    with caplog.at_level("INFO", logger="assay.events"):
        anyio.run(prepare_sampling, config, samplers)
    assert samplers["exact_match"].populations == {"x": 180, "y": 20}
    (event,) = [r for r in caplog.records if getattr(r, "event", None) == "sampling_counted"]
    assert event.traces == 200 and event.strata == {"exact_match": 2}  # type: ignore[attr-defined]


# --- the evaluate stage -----------------------------------------------------------------------


class Batched(Evaluator[EvaluatorParams]):
    name = "batched"

    def score(self, trace: Trace) -> Result:
        return Result(self.key, 1.0)

    def score_traces(self, batch: list[Trace]) -> list[list[Result]]:
        return [[Result(self.key, 1.0, len(batch))] for _ in batch]


class Echo(AsyncEvaluator[EvaluatorParams]):
    name = "echo"

    async def ascore(self, trace: Trace) -> Result:
        return Result(self.key, 0.0 if str(trace.id).endswith("7") else 1.0)


def test_unsampled_traces_get_no_result_for_the_key() -> None:
    evaluators = [TrajectoryMatch(mode="strict"), Batched(), Echo()]
    specs = [SampleSpec(rate=0.3), SampleSpec(rate=0.5, seed=1), SampleSpec(rate=0.2)]
    for ev, spec in zip(evaluators, specs, strict=True):
        ev.sampler = Sampler(spec, ev.key)
    samplers = samplers_of(evaluators)
    items = [
        {"id": f"t{i}", "messages": agent_messages(("search", {"q": "x"})), "reference_outputs": "x"} for i in range(60)
    ]
    sink, dead = ListSink(), ListSink()

    async def go() -> Pipeline:
        pipe = Pipeline(
            ListSource(items, batch_size=7),
            EvaluateStage(evaluators),  # the evaluators' own samplers
            sink,
            dead,
            RunOptions(run_id="r", workers=2),
        )
        await pipe.run()
        return pipe

    pipe = anyio.run(go)
    rows = sink.records()
    assert len(rows) == 60
    for ev in evaluators:
        expected = {f"t{i}" for i in range(60) if samplers[ev.key].weight(Trace(id=f"t{i}")) is not None}
        got = {r["trace_id"] for r in rows if ev.key in r["results"]}
        assert got == expected and 0 < len(got) < 60, ev.key
        weights = {r["results"][ev.key]["metadata"]["sample_weight"] for r in rows if ev.key in r["results"]}
        assert weights == {1.0 / samplers[ev.key].spec.rate}
        assert pipe.stats.keys[ev.key].count == len(expected)
    # the batched evaluator saw only its sampled traces of each batch
    sizes = [r["results"]["batched"]["value"] for r in rows if "batched" in r["results"]]
    assert max(sizes) < 7


def test_a_late_counting_pass_runs_once_and_never_opens_kafka_twice(tmp_path: Path) -> None:
    from assay.pipeline.assembly import build_evaluators

    (tmp_path / "c.jsonl").write_text("".join(f'{{"id": "t{i}", "outputs": "a"}}\n' for i in range(30)))
    sample = {"rate": 0.1, "strata": "metadata.m", "min_per_stratum": 5}
    config = build_config(
        {
            "source": {"path": str(tmp_path / "c.jsonl")},
            "evaluators": [{"name": "exact_match", "sample": sample}],
            "sink": {"path": str(tmp_path / "out/")},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    stage = EvaluateStage(build_evaluators(config))
    sampler = stage.samplers["exact_match"]
    assert not sampler.ready
    batch = [Trace(id=f"t{i}") for i in range(30)]
    results, _ = anyio.run(stage.process, batch)  # counted here: nobody ran the pass before
    assert sampler.ready and sampler.populations == {"(missing)": 30}
    assert sum("exact_match" in r for r in results) == 5
    anyio.run(prepare_sampling, config, stage.samplers)  # a second call counts nothing twice
    assert sampler.populations == {"(missing)": 30}

    kafka = {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["t"], "group_id": "g"}
    config = build_config(
        {"source": kafka, "evaluators": [{"name": "exact_match", "sample": sample}], "sink": {"path": "o/"}}
    )
    stage = EvaluateStage(build_evaluators(config))
    with pytest.raises(ConfigError, match="before the input is opened"):
        anyio.run(stage.process, batch)


def test_the_counts_are_kept_for_later_processes_on_the_same_input(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from assay.pipeline.assembly import build_evaluators

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(f'{{"id": "t{i}", "outputs": "a", "metadata": {{"m": "{i % 3}"}}}}\n' for i in range(90)))
    config = build_config(
        {
            "source": {"path": str(corpus)},
            "evaluators": [
                {"name": "exact_match", "sample": {"rate": 0.1, "strata": "metadata.m", "min_per_stratum": 4}}
            ],
            "sink": {"path": str(tmp_path / "out/")},
            "state_dir": str(tmp_path / ".assay"),
        }
    )

    def prepared() -> tuple[dict[str, int], int]:
        samplers = samplers_of(build_evaluators(config))  # a new process: new samplers
        caplog.clear()
        with caplog.at_level("INFO", logger="assay.events"):
            anyio.run(prepare_sampling, config, samplers)
        passes = sum(getattr(r, "event", None) == "sampling_counted" for r in caplog.records)
        return samplers["exact_match"].populations, passes

    assert prepared() == ({"0": 30, "1": 30, "2": 30}, 1)
    assert len(list((tmp_path / ".assay" / "sampling").glob("counts-*.json"))) == 1
    assert prepared() == ({"0": 30, "1": 30, "2": 30}, 0)  # read from the counts, not counted again
    with corpus.open("a") as f:  # the input changed: counted again
        f.write('{"id": "new", "outputs": "a", "metadata": {"m": "0"}}\n')
    assert prepared() == ({"0": 31, "1": 30, "2": 30}, 1)
