"""``assay calibrate``: a judge against human labels; checked against scikit-learn and scipy."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest

from assay.exceptions import ConfigError
from assay.report.calibrate import calibrate, calibrate_command
from assay.stats import ppi_from_moments, self_consistency
from assay.stats.labels import load_labels


def make_data(tmp_path: Path, n: int = 300, labelled: int = 120, seed: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """A run (a binary judge key and a continuous one) and the human labels of some traces."""
    rng = random.Random(seed)
    out = tmp_path / "run"
    out.mkdir()
    labels = []
    with open(out / "part-00000.jsonl", "w") as f:
        for i in range(n):
            truth = rng.random() < 0.65
            judged = truth if rng.random() < 0.8 else not truth
            quality = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
            score = round(min(1.0, max(0.0, quality + rng.gauss(0.05, 0.2))), 3)
            results = {
                "correctness": {"key": "correctness", "score": float(judged), "value": judged},
                "helpfulness": {"key": "helpfulness", "score": score},
            }
            if i == 7:
                results["correctness"] = {"key": "correctness", "score": None, "error": "judge down"}
            f.write(json.dumps({"trace_id": f"t{i}", "results": results}) + "\n")
            if i < labelled:
                labels.append({"trace_id": f"t{i}", "key": "correctness", "label": "pass" if truth else "fail"})
                labels.append({"trace_id": f"t{i}", "key": "helpfulness", "label": quality})
    summary = {"evaluators": {"correctness": {"threshold": 0.5}, "helpfulness": {"threshold": 0.5}}}
    (out / "_SUMMARY.json").write_text(json.dumps(summary))
    return str(out), labels


def write_labels(path: Path, labels: list[dict[str, Any]]) -> str:
    if path.suffix == ".csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["trace_id", "key", "label"])
            w.writeheader()
            w.writerows(labels)
    elif path.suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        table = pa.table({c: [str(r[c]) for r in labels] for c in ("trace_id", "key", "label")})
        pq.write_table(table, path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in labels))
    return str(path)


def _pairs(run: str, labels: list[dict[str, Any]], key: str) -> tuple[list[Any], list[Any]]:
    rows = {}
    for line in (Path(run) / "part-00000.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["trace_id"]] = row["results"][key]
    human, judge = [], []
    for lab in labels:
        r = rows[lab["trace_id"]] if lab["key"] == key else None
        if r is None or r.get("error"):
            continue
        human.append(lab["label"])
        judge.append(r["score"])
    return human, judge


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_kappa_confusion_spearman_mae_agree_with_sklearn_and_scipy(tmp_path: Path, suffix: str) -> None:
    skm = pytest.importorskip("sklearn.metrics")  # here, not at import: every worker would pay ~1.5 s
    scipy_stats = pytest.importorskip("scipy.stats")
    run, labels = make_data(tmp_path)
    report = calibrate(run, write_labels(tmp_path / f"labels{suffix}", labels))
    c = report["keys"]["correctness"]
    human, judge = _pairs(run, labels, "correctness")
    judge_v = ["pass" if s >= 0.5 else "fail" for s in judge]
    assert c["n"] == len(human) == 119 and c["judge_errors"] == 1  # trace t7: the judge errored
    assert c["kappa"] == pytest.approx(skm.cohen_kappa_score(human, judge_v), abs=1e-12)
    assert c["confusion"]["labels"] == ["fail", "pass"]
    assert c["confusion"]["matrix"] == skm.confusion_matrix(human, judge_v, labels=["fail", "pass"]).tolist()
    assert c["agreement"] == pytest.approx(skm.accuracy_score(human, judge_v))
    assert c["base_rate"] == pytest.approx(human.count("pass") / len(human))
    h = report["keys"]["helpfulness"]
    hh, hj = _pairs(run, labels, "helpfulness")
    hh = [float(x) for x in hh]
    assert h["spearman"] == pytest.approx(scipy_stats.spearmanr(hh, hj).statistic, abs=1e-12)
    assert h["mae"] == pytest.approx(skm.mean_absolute_error(hh, hj), abs=1e-12)
    assert report["labelled_traces"] == 120 and report["missing_traces"] == 0


def test_json_prints_one_object_and_min_kappa_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, labels = make_data(tmp_path)
    path = write_labels(tmp_path / "labels.jsonl", labels)
    assert calibrate_command(run, path, json_out=True) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert out.err == "" and set(data["keys"]) == {"correctness", "helpfulness"}
    assert calibrate_command(run, path, json_out=True, min_kappa=0.99) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 3 and data["messages"][0].startswith("correctness: kappa")


def test_corrected_estimate_covers_the_truth(tmp_path: Path) -> None:
    """PPI: a judge biased by about +0.1 on 2000 traces, 150 labelled; the corrected interval covers
    the human mean in at least 90 % of 100 seeded draws, the judge's own mean never does."""
    covered = 0
    for seed in range(100):
        rng = random.Random(seed)
        human = [rng.random() < 0.6 for _ in range(2000)]
        judge = [min(1.0, h * 0.9 + 0.5 * rng.random()) for h in human]
        truth = sum(human) / len(human)
        labelled = rng.sample(range(2000), 150)
        residuals = [float(human[i]) - judge[i] for i in labelled]
        est = ppi_from_moments(2000, sum(judge), sum(j * j for j in judge), residuals)
        assert est is not None
        lo, hi = est["ci"]
        covered += lo <= truth <= hi
        assert abs(est["judge_mean"] - truth) > 0.05
    assert covered >= 90


def test_correct_and_samples_in_the_report(tmp_path: Path) -> None:
    run, labels = make_data(tmp_path)
    # three samples of one judge per trace, in the result's metadata
    part = Path(run) / "part-00000.jsonl"
    rows = [json.loads(line) for line in part.read_text().splitlines()]
    for i, row in enumerate(rows):
        r = row["results"]["correctness"]
        if r.get("score") is not None:
            r["metadata"] = {"samples": [r["score"], r["score"], 1.0 - r["score"] if i % 4 == 0 else r["score"]]}
    part.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = calibrate(run, write_labels(tmp_path / "l.jsonl", labels), samples=3, correct=True)
    sc = report["keys"]["correctness"]["self_consistency"]
    assert sc["samples"] == 3 and sc["traces"] == 299 and sc["rate"] == pytest.approx(1 - 75 / 299)
    corr = report["keys"]["correctness"]["corrected"]
    assert corr["n_judged"] == 299 and corr["n_labelled"] == 119
    assert corr["estimate"] == pytest.approx(corr["judge_mean"] + corr["rectifier"])


def test_self_consistency_rates() -> None:
    r = self_consistency([["pass", "pass", "pass"], ["pass", "fail", "pass"], ["fail", "fail", "fail"]])
    assert r["rate"] == pytest.approx(2 / 3) and r["pairwise"] == pytest.approx(7 / 9)


def test_labels_need_their_columns(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"trace_id": "t1", "label": "pass"}) + "\n")
    with pytest.raises(ConfigError, match="no key"):
        load_labels(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_labels(tmp_path / "absent.csv")


SCORER = """
def judged(metadata):
    return metadata["judge"]
"""


def _labelled_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_kappa: float, shard: tuple[int, int] | None = None
) -> Any:
    import anyio

    from assay.config import RunConfig
    from assay.pipeline.run import execute

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "scorer_cal.py").write_text(SCORER)
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = random.Random(4)
    recs, labels = [], []
    for i in range(200):
        truth = rng.random() < 0.5
        judge = truth if rng.random() < 0.85 else not truth
        recs.append({"id": f"t{i}", "inputs": "q", "outputs": "a", "metadata": {"judge": float(judge)}})
        if i % 2 == 0:
            labels.append({"trace_id": f"t{i}", "key": "judged", "label": "pass" if truth else "fail"})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    write_labels(tmp_path / "labels.csv", labels)
    config = RunConfig.model_validate(
        {
            "source": {"path": str(tmp_path / "in.jsonl")},
            "evaluators": [{"name": "python", "params": {"function": "scorer_cal:judged", "key": "judged"}}],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / ".assay"),
            "calibration": {"labels": str(tmp_path / "labels.csv")},
            "gates": {"judged": {"min_kappa": min_kappa}},
        }
    )
    return anyio.run(lambda: execute(config, use_cache=False, shard=shard)), labels


def test_run_file_min_kappa_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report, labels = _labelled_run(tmp_path / "a", monkeypatch, min_kappa=0.5)
    key = report.summary["evaluators"]["judged"]
    assert report.exit_code == 0 and key["calibration"]["n"] == len(labels) == 100
    # the run's kappa is the calibrate command's on the same rows and labels
    offline = calibrate(str(tmp_path / "a" / "out"), str(tmp_path / "a" / "labels.csv"))
    assert key["kappa"] == pytest.approx(offline["keys"]["judged"]["kappa"]) and key["kappa"] > 0.5
    from assay.report.terminal import print_summary

    print_summary(report.summary)
    assert f"judge vs human labels (Cohen's kappa): judged {key['kappa']:.3f}" in capsys.readouterr().out
    strict, _ = _labelled_run(tmp_path / "b", monkeypatch, min_kappa=0.95)
    assert strict.exit_code == 3 and strict.summary["status"] == "gate_failed"
    assert any("kappa" in m for m in strict.messages)


def test_kappa_of_shards_merged_equals_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.pipeline.merge import merge

    whole, _ = _labelled_run(tmp_path / "whole", monkeypatch, min_kappa=0.5)
    for i in range(3):
        _labelled_run(tmp_path / "sharded", monkeypatch, min_kappa=0.5, shard=(i, 3))
    merged = merge(tmp_path / "sharded" / "out")
    key = merged.summary["evaluators"]["judged"]
    assert key["kappa"] == pytest.approx(whole.summary["evaluators"]["judged"]["kappa"])
    assert key["calibration"]["n"] == 100 and merged.exit_code == 0


def test_validate_wants_labels_for_a_min_kappa_gate() -> None:
    from assay.pipeline.gates import gate_keys_problems

    gates = {"judged": {"min_kappa": 0.6}}
    assert gate_keys_problems(gates, ["judged"]) == [
        "gates.judged.min_kappa: needs human labels (calibration: {labels: PATH})"
    ]
    assert gate_keys_problems(gates, ["judged"], labels="labels.csv") == []


def test_cli_calibrate_json(tmp_path: Path) -> None:
    import subprocess
    import sys

    run, labels = make_data(tmp_path)
    path = write_labels(tmp_path / "labels.csv", labels)
    root = Path(__file__).resolve().parents[3]
    cmd = [sys.executable, "-m", "assay.cli", "calibrate", run, path, "--json", "--correct", "--min-kappa", "0.1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["keys"]["correctness"]["corrected"]["n_labelled"] == 119 and proc.stderr == ""
