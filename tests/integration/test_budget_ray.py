"""``limits.budget_usd`` in a Ray job: the actors spend one budget (``<state_dir>/budget.sqlite``
under the job's run id), so together they stop within one request's cost of it (each holding the
whole cap, two actors spent up to twice it); the traces the budget cut short say so in their judged
column; the same job again sends nothing, and a raised cap goes on without paying a call twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.conftest import agent_messages
from tests.integration.test_budget import IN_PRICE, OUT_PRICE, Verbose

pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # one worker, one local Ray (tests/support/ray_fixtures.py)

ROOT = Path(__file__).resolve().parents[2]
N = 120
CAP = 0.3


def _table(path: Path, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "id": f"t{i}",
            "inputs": f"question {seed}-{i} " + "detail " * (50 + (i * 7919 + seed) % 400),
            "messages": agent_messages(("search", {"q": i}), final=f"answer {i}"),
            "reference_outputs": f"answer {i}",
        }
        for i in range(N)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=20)


def _run_file(tmp_path: Path, url: str) -> Path:
    cfg: dict[str, Any] = {
        "source": {"path": str(tmp_path / "traces.parquet")},
        "judges": {
            "standin": {
                "provider": "openai",
                "base_url": f"{url}/v1",
                "model": "judge-1",
                "timeout": 20,
                "hedge": False,
                "rpm": 60000,
                "max_concurrency": 16,
                "input_price_per_mtok": IN_PRICE,
                "output_price_per_mtok": OUT_PRICE,
            }
        },
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "standin"}}],
        "sink": {"path": str(tmp_path / "out") + "/"},
        "state_dir": str(tmp_path / "state"),
        "limits": {"budget_usd": CAP},
    }
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(cfg))
    return path


def _job(run_file: Path, sets: list[str]) -> list[dict[str, Any]]:
    from assay.integrations.ray import AssayScorer

    ds = ray.data.read_parquet(str(run_file.parent / "traces.parquet"), override_num_blocks=6)
    scored = ds.map_batches(
        AssayScorer,
        fn_constructor_kwargs={"run_file": str(run_file), "sets": sets},
        batch_format="pyarrow",
        batch_size=10,
        concurrency=2,
        num_cpus=0.5,
    )
    return [r for ref in scored.to_arrow_refs() for r in ray.get(ref).to_pylist()]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
@pytest.mark.filterwarnings("ignore::UserWarning:ray")
@pytest.mark.parametrize("seed", [5])
def test_ray_actors_share_one_budget(tmp_path: Path, seed: int, ray_local: Any) -> None:
    _table(tmp_path / "traces.parquet", seed)
    rule = Verbose()
    with JudgeServerThread(latency=(0.02, 0.2), seed=seed, rule=rule) as server:
        run_file = _run_file(tmp_path, server.url)
        first = _job(run_file, [])
        paid = server.stats.requests
        spent = sum(rule.costs)
        again = _job(run_file, [])  # the same cap: nothing is sent
        resent = server.stats.requests - paid
        raised = _job(run_file, ["limits.budget_usd=100"])
    one = max(rule.costs[:paid])
    assert CAP - one < spent <= CAP + one, (spent, one, paid)
    assert 0 < paid < N and resent == 0
    for rows in (first, again):
        assert len(rows) == N
        cut = [r for r in rows if r["correctness"]["error"] is not None]
        assert len(cut) == N - paid and all("judge budget of $0.3 reached" in r["correctness"]["error"] for r in cut)
    assert len(raised) == N and all(r["correctness"]["error"] is None for r in raised)
    assert len(rule.prompts) == len(set(rule.prompts)) == N  # every judge call paid once over the three jobs
