"""assay's trajectory match against recorded openevals / agentevals / potato results.

The golden file (written by ``generate_trajectory_golden.py`` in a venv holding the reference
libraries) stores the inputs and the references' results, so this test runs without them:

* wherever assay has no documented difference, assay == openevals. That covers every case where
  openevals and agentevals agree, and the argument-order swap where they do not (assay follows
  openevals);
* with field-path overrides, assay == the documented rule evaluated on openevals' machinery (D);
* edge cases with a documented difference carry assay's expected result and the reason;
* ``strict_scope="tool_calls"`` reproduces potato's flat strict mode.
"""

from __future__ import annotations

import copy
import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from assay.evaluators import TrajectoryMatch
from assay.exceptions import AssayError, ConfigError
from tests.conftest import load_module

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "trajectory.json.gz"


CALLABLES: dict[str, Any] = dict(load_module(HERE / "_trajectory_callables.py", "_trajectory_callables").CALLABLES)


@cache
def golden() -> dict[str, Any]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def configs() -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in golden()["configs"]}


def _overrides(cfg: dict[str, Any]) -> dict[str, Any] | None:
    if cfg["overrides"] is None:
        return None
    return {
        tool: CALLABLES[spec["callable"]] if isinstance(spec, dict) else spec for tool, spec in cfg["overrides"].items()
    }


def build(cfg: dict[str, Any], scope: str = "messages") -> TrajectoryMatch | None:
    """The assay evaluator for a golden configuration (None when assay refuses the config)."""
    try:
        return TrajectoryMatch(
            mode=cfg["mode"],
            tool_args_match_mode=cfg["args"],
            tool_args_match_overrides=_overrides(cfg),
            strict_scope=scope,
        )
    except ConfigError:
        return None


def run(ev: TrajectoryMatch | None, case: dict[str, Any]) -> str:
    if ev is None:
        return "C"
    outputs, reference = copy.deepcopy(case["outputs"]), copy.deepcopy(case["reference"])
    try:
        result = ev.evaluate(outputs=outputs, reference_outputs=reference)
    except AssayError:
        return "E"
    assert (outputs, reference) == (case["outputs"], case["reference"]), "assay mutated its inputs"
    if result.error is not None:
        return "E"
    if result.score is None:
        return "N"
    assert result.score in (0.0, 1.0) and result.value is (result.score == 1.0)
    return "T" if result.score == 1.0 else "F"


def expected(case: dict[str, Any], i: int) -> str:
    cid = case["configs"][i]
    if cid in case.get("assay", {}):
        return str(case["assay"][cid])
    res = case["results"]
    if res["D"][i] != "-":
        return str(res["D"][i])
    if res["O"][i] == "E":
        pytest.fail(f"{case['id']} {cid}: openevals raised and the case documents no assay result")
    return str(res["O"][i])


def _cases_for(cid: str) -> list[tuple[dict[str, Any], int]]:
    return [(c, c["configs"].index(cid)) for c in golden()["cases"] if cid in c["configs"]]


CONFIG_IDS = [c["id"] for c in json.loads(gzip.decompress(GOLDEN.read_bytes()))["configs"]]


@pytest.mark.parametrize("cid", CONFIG_IDS)
def test_assay_matches_references(cid: str) -> None:
    ev = build(configs()[cid])
    wrong = []
    for case, i in _cases_for(cid):
        got, want = run(ev, case), expected(case, i)
        if got != want:
            res = case["results"]
            refs = f"O={res['O'][i]} A={res['A'][i]} D={res['D'][i]}"
            wrong.append(f"{case['id']}: assay {got}, expected {want} ({refs})")
    assert not wrong, f"{len(wrong)} disagreements, first: " + "; ".join(wrong[:8])


def _potato_comparable(cfg: dict[str, Any]) -> bool:
    # potato accepts only mode-string overrides
    return cfg["mode"] == "strict" and all(isinstance(v, str) for v in (cfg["overrides"] or {}).values())


@pytest.mark.parametrize("cid", [c for c in CONFIG_IDS if c.startswith("strict/")])
def test_strict_tool_calls_scope_matches_potato(cid: str) -> None:
    cfg = configs()[cid]
    if not _potato_comparable(cfg):
        pytest.skip("potato rejects list and callable overrides")
    ev = build(cfg, scope="tool_calls")
    wrong = []
    for case, i in _cases_for(cid):
        want = case["results"]["P"][i]
        if want == "E" or case.get("potato_differs") or case["id"] == "edge-reference-null":
            continue
        got = run(ev, case)
        if got != want:
            wrong.append(f"{case['id']}: assay {got}, potato {want}")
    assert not wrong, f"{len(wrong)} disagreements, first: " + "; ".join(wrong[:8])


def test_references_disagree_only_where_documented() -> None:
    """openevals and agentevals differ only in the argument-order swap and in field-path handling."""
    cfgs = configs()
    unexplained = []
    for case in golden()["cases"]:
        for i, cid in enumerate(case["configs"]):
            res = case["results"]
            if res["O"][i] == res["A"][i]:
                continue
            cfg = cfgs[cid]
            swap = cfg["mode"] in ("subset", "unordered") and (
                cfg["args"] in ("subset", "superset")
                or any(isinstance(v, dict) for v in (cfg["overrides"] or {}).values())
            )
            if not (swap or res["D"][i] != "-"):
                unexplained.append(f"{case['id']} {cid}")
    assert not unexplained, unexplained[:10]


def test_generated_corpus_exercises_passes_and_failures() -> None:
    """Every corpus configuration sees both outcomes, so the differential test can catch both kinds of bug."""
    seen: dict[str, set[str]] = {}
    for case in golden()["cases"]:
        if case["kind"] != "generated":
            continue
        for i, cid in enumerate(case["configs"]):
            seen.setdefault(cid, set()).add(case["results"]["O"][i])
    assert seen and all({"T", "F"} <= codes for codes in seen.values()), seen


def test_documented_differences_say_why() -> None:
    for case in golden()["cases"]:
        if "assay" in case:
            assert case.get("why"), case["id"]


def test_golden_is_small_and_has_enough_cases() -> None:
    assert GOLDEN.stat().st_size < 2_000_000
    kinds = [c["kind"] for c in golden()["cases"]]
    assert kinds.count("generated") >= 300 and kinds.count("edge") >= 40
