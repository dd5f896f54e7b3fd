"""Juries and samples of judges over HTTP (the stand-in judge server): every verdict stored."""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.config import RunConfig
from assay.pipeline.run import execute
from assay.testing.judge_server import JudgeServerThread


def _judges(url: str, models: list[str], **extra: Any) -> dict[str, Any]:
    return {
        m: {"provider": "openai", "base_url": f"{url}/v1", "model": m, "max_retries": 1, "timeout": 5, **extra}
        for m in models
    }


def _run(tmp_path: Path, judges: dict[str, Any], params: dict[str, Any], n: int = 12) -> list[dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(n)))
    config = RunConfig.model_validate(
        {
            "source": {"path": str(src)},
            "judges": judges,
            "evaluators": [
                {"name": "llm_judge", "params": {"prompt": "Is {outputs} polite?", "key": "polite", **params}}
            ],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    report = anyio.run(lambda: execute(config))
    assert report.exit_code == 0, report.messages
    part = next((tmp_path / "out").glob("part-*.jsonl"))
    return [json.loads(line) for line in part.read_text().splitlines()]


def test_a_jury_of_three_stores_three_verdicts_per_row(tmp_path: Path) -> None:
    def rule(body: dict[str, Any]) -> dict[str, Any]:  # judge-c always dissents
        return {"reasoning": f"{body['model']} says", "score": body["model"] != "judge-c"}

    with JudgeServerThread(rule=rule) as srv:
        rows = _run(
            tmp_path, _judges(srv.url, ["judge-a", "judge-b", "judge-c"]), {"judges": ["judge-a", "judge-b", "judge-c"]}
        )
        requests = srv.server.stats.requests
    assert len(rows) == 12 and requests == 36  # three calls per trace
    for row in rows:
        r = row["results"]["polite"]
        jury = r["metadata"]["jury"]
        assert [v["judge"] for v in jury["verdicts"]] == ["judge-a", "judge-b", "judge-c"]
        assert [v["passed"] for v in jury["verdicts"]] == [True, True, False]
        assert r["score"] == 1.0 and jury["aggregate"] == "majority"
        assert jury["agreement"] == pytest.approx(2 / 3)
        assert r["metadata"]["usage"]["calls"] == 3
        assert row["identity"]["polite"].endswith("judge-a+judge-b+judge-c")


@pytest.mark.parametrize(("aggregate", "score"), [("all", 0.0), ("min", 0.0), ("mean", pytest.approx(2 / 3))])
def test_aggregates(tmp_path: Path, aggregate: str, score: Any) -> None:
    def rule(body: dict[str, Any]) -> dict[str, Any]:
        return {"reasoning": "r", "score": body["model"] != "judge-c"}

    with JudgeServerThread(rule=rule) as srv:
        rows = _run(
            tmp_path,
            _judges(srv.url, ["judge-a", "judge-b", "judge-c"]),
            {"judges": ["judge-a", "judge-b", "judge-c"], "aggregate": aggregate},
            n=3,
        )
    assert all(row["results"]["polite"]["score"] == score for row in rows)


def test_samples_ask_one_judge_k_times_each_its_own_answer(tmp_path: Path) -> None:
    counter = itertools.count()
    lock = threading.Lock()

    def rule(body: dict[str, Any]) -> dict[str, Any]:  # answers alternate: samples differ
        with lock:
            i = next(counter)
        return {"reasoning": "r", "score": i % 5 != 0}

    with JudgeServerThread(rule=rule) as srv:
        judges = _judges(srv.url, ["judge-a"], temperature=0.7)
        rows = _run(tmp_path / "a", judges, {"judge": "judge-a", "samples": 5})
        first = srv.server.stats.requests
        again = _run(tmp_path / "a", judges, {"judge": "judge-a", "samples": 5})  # a rerun: every sample cached
        assert srv.server.stats.requests == first == 12 * 5
    for row in rows:
        r = row["results"]["polite"]
        assert len(r["metadata"]["samples"]) == 5 and len(r["metadata"]["jury"]["verdicts"]) == 5
        assert [v["sample"] for v in r["metadata"]["jury"]["verdicts"]] == [0, 1, 2, 3, 4]
    total_fails = sum(s == 0.0 for row in rows for s in row["results"]["polite"]["metadata"]["samples"])
    assert total_fails == 12  # one answer in five fails: the samples were five distinct calls
    assert [r["results"]["polite"]["metadata"]["samples"] for r in again] == [
        r["results"]["polite"]["metadata"]["samples"] for r in rows
    ]
    # assay calibrate --samples 5 reads the samples back: its self-consistency is the rows'
    from assay.report.calibrate import calibrate

    labels = {r["trace_id"]: {"polite": "pass"} for r in rows}
    report = calibrate(str(tmp_path / "a" / "out"), labels, samples=5)
    unanimous = sum(len(set(r["results"]["polite"]["metadata"]["samples"])) == 1 for r in rows)
    assert report["keys"]["polite"]["self_consistency"]["rate"] == pytest.approx(unanimous / len(rows))


PAIRWISE = "Question: {inputs}\nAnswer A: {outputs}\nAnswer B: {reference_outputs}\nIs answer A better than answer B?"


def test_swap_asks_both_orders_and_the_summary_reports_position_consistency(tmp_path: Path) -> None:
    def rule(body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body["messages"])
        a = text.split("Answer A:", 1)[1].split("Answer B:", 1)[0]
        if "biased" in text:  # a position-biased judge: whatever comes first wins
            return {"reasoning": "first", "score": True}
        return {"reasoning": "content", "score": "good" in a}

    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "in.jsonl"
    recs = [
        {
            "id": f"t{i}",
            "inputs": f"q{i}" + (" biased" if i % 4 == 0 else ""),
            "outputs": "good",
            "reference_outputs": "bad",
        }
        for i in range(8)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with JudgeServerThread(rule=rule) as srv:
        config = RunConfig.model_validate(
            {
                "source": {"path": str(src)},
                "judges": _judges(srv.url, ["judge-a"]),
                "evaluators": [{"name": "llm_judge", "params": {"prompt": PAIRWISE, "key": "a_wins", "swap": True}}],
                "sink": {"path": str(tmp_path / "out") + "/"},
                "state_dir": str(tmp_path / ".assay"),
            }
        )
        report = anyio.run(lambda: execute(config))
        assert srv.server.stats.requests == 16  # both orders of every trace
    rows = {
        json.loads(x)["trace_id"]: json.loads(x)
        for x in next((tmp_path / "out").glob("part-*")).read_text().splitlines()
    }
    biased, fair = rows["t0"]["results"]["a_wins"], rows["t1"]["results"]["a_wins"]
    assert (biased["score"], biased["value"], biased["metadata"]["swap"]["consistent"]) == (0.5, "tie", False)
    assert (fair["score"], fair["value"], fair["metadata"]["swap"]["consistent"]) == (1.0, True, True)
    key = report.summary["evaluators"]["a_wins"]
    assert key["position_consistency"] == pytest.approx(6 / 8) and key["swap_checked"] == 8
    from assay.report.terminal import console, print_summary

    with console.capture() as captured:
        print_summary(report.summary)
    assert "position consistency (swap): a_wins 0.750" in captured.get()


def test_a_jury_that_reaches_the_budget_stops_the_run_cleanly(tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(40))
    )
    with JudgeServerThread(rule=lambda body: {"reasoning": "r", "score": True}) as srv:
        judges = _judges(srv.url, ["judge-a", "judge-b"], input_price_per_mtok=2000.0, output_price_per_mtok=2000.0)
        config = RunConfig.model_validate(
            {
                "source": {"path": str(src)},
                "judges": judges,
                "evaluators": [
                    {
                        "name": "llm_judge",
                        "params": {"prompt": "Is {outputs} polite?", "judges": ["judge-a", "judge-b"]},
                    }
                ],
                "sink": {"path": str(tmp_path / "out") + "/"},
                "state_dir": str(tmp_path / ".assay"),
                "limits": {"budget_usd": 0.5, "batch_size": 4},
            }
        )
        report = anyio.run(lambda: execute(config))
    assert report.status == "budget" and report.exit_code == 5, report.messages


def test_samples_in_batch_mode_submit_one_line_per_sample(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from assay.testing.batch_server import BatchServerThread

    tmp_path.mkdir(parents=True, exist_ok=True)
    n = 10
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(n))
    )
    with BatchServerThread(delay=(0.1, 0.3), seed=3) as server:
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {
                "gpt": {
                    "provider": "openai",
                    "base_url": f"{server.url}/v1",
                    "model": "judge-1",
                    "mode": "batch",
                    "batch": {"poll_interval_s": 0.2},
                }
            },
            "evaluators": [
                {"name": "llm_judge", "params": {"prompt": "Is {outputs} polite?", "key": "polite", "samples": 3}}
            ],
            "sink": {"path": "out/"},
        }
        (tmp_path / "run.yaml").write_text(json.dumps(cfg))
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        root = Path(__file__).resolve().parents[3]
        env["PYTHONPATH"] = str(root)
        codes = []
        for _ in range(30):
            proc = subprocess.run(
                [sys.executable, "-m", "assay.cli", "run", "run.yaml", "-q"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            codes.append(proc.returncode)
            if proc.returncode == 0:
                break
            assert proc.returncode == 75, proc.stderr
            time.sleep(0.3)
        assert codes[-1] == 0 and codes[0] == 75
        assert len(server.stats.submissions) == n * 3  # three distinct lines per trace: one per sample
    rows = [json.loads(x) for p in sorted((tmp_path / "out").glob("part-*")) for x in p.read_text().splitlines()]
    assert len(rows) == n
    assert all(len(r["results"]["polite"]["metadata"]["jury"]["verdicts"]) == 3 for r in rows)
