"""``--dry-run`` never shows 0 calls or $0 without saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from assay.config import build_config
from assay.pipeline.dry_run import dry_run

JUDGE = {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}


def _records(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_zero_calls_and_zero_cost_say_why(tmp_path: Path) -> None:
    source = _records(tmp_path, [{"id": f"t{i}", "inputs": "q", "outputs": "a"} for i in range(3)])
    # a prompt variable the data lacks: no call for any record
    custom = {"name": "llm_judge", "params": {"prompt": "Is {outputs} about {topic}?", "judge": "j"}}
    cfg = {"source": {"path": source}, "judges": {"j": JUDGE}, "evaluators": [custom], "sink": {"path": "o/"}}
    report = anyio.run(dry_run, build_config(cfg))
    assert report["calls"] == 0
    assert report["notes"] == [
        "score: no call for 3 of 3 records: prompt variable {topic} is missing: the trace has no topic "
        "(give it in the record, its scenario/metadata, or params.variables)"
    ]
    # calls, but no prices: $0 says so
    cfg["evaluators"] = [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}]
    report = anyio.run(dry_run, build_config(cfg))
    assert report["calls"] == 3 and report["cost_usd"] == 0
    assert report["notes"] == [
        "correctness: $0 because judge 'j' has no prices (set input_price_per_mtok and output_price_per_mtok)"
    ]
    # no judge evaluator at all
    plain = {"source": {"path": source}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
    report = anyio.run(dry_run, build_config(plain))
    assert report["notes"] == ["no evaluator calls a judge (exact_match): a dry run estimates judge calls only"]


def test_the_cli_prints_the_reasons(tmp_path: Path, run_cli: Any) -> None:
    source = _records(tmp_path, [{"id": "t0", "inputs": "q", "outputs": "a"}])
    cfg = {"source": {"path": source}, "judges": {"j": JUDGE}, "sink": {"path": str(tmp_path / "o") + "/"}}
    cfg["evaluators"] = [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}]
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    res = run_cli("run", str(f), "--dry-run")  # a process of its own: a run sets up the process's logging
    assert res.returncode == 0, res.stderr
    assert "why: correctness: $0 because judge 'j' has no prices" in res.stdout


def test_a_prompt_variable_no_record_has_is_a_config_error(tmp_path: Path, run_cli: Any) -> None:
    """Missing in some records: an error result each (the others are judged). Missing in each of
    the first 20 records: the prompt names a field the data lacks, exit 2 (a retry would not help)."""
    from assay.evaluators.llm_judge import MISSING_VARIABLE_LIMIT
    from assay.testing.judge_server import JudgeServerThread

    rows = [{"id": f"t{i}", "inputs": "q", "outputs": "a", **({"topic": "x"} if i % 2 else {})} for i in range(30)]
    source = _records(tmp_path, rows)
    with JudgeServerThread() as server:
        judge = {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m"}
        custom = {"name": "llm_judge", "params": {"prompt": "Is {outputs} about {topic}?", "judge": "j"}}
        cfg = {"source": {"path": source}, "judges": {"j": judge}, "evaluators": [custom]}
        f = tmp_path / "run.yaml"
        f.write_text(json.dumps({**cfg, "sink": {"path": str(tmp_path / "some") + "/"}}))
        res = run_cli("run", str(f), "-q")
        assert res.returncode == 0, res.stderr  # half the records are errors (not above max_error_rate 0.5)
        out = [json.loads(line) for p in (tmp_path / "some").glob("part-*") for line in p.read_text().splitlines()]
        errors = [r for r in out if r["results"]["score"]["error"]]
        assert len(errors) == 15 and "prompt variable {topic} is missing" in errors[0]["results"]["score"]["error"]
        source = _records(tmp_path, [{k: v for k, v in r.items() if k != "topic"} for r in rows])
        f.write_text(json.dumps({**cfg, "sink": {"path": str(tmp_path / "none") + "/"}}))
        res = run_cli("run", str(f), "-q")
        assert res.returncode == 2, res.stderr
        assert (
            f"prompt variable {{topic}} is missing in each of the first {MISSING_VARIABLE_LIMIT} traces" in res.stderr
        )
        assert server.stats.requests == 15
