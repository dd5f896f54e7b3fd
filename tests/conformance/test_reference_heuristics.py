"""exact_match, edit_distance and json_match against recorded openevals / potato results.

The golden file (written by ``generate_heuristics_golden.py`` in a venv holding the reference
libraries) stores the inputs and the references' results, so this runs without them:

* wherever openevals and potato agree (exact_match, edit_distance), assay agrees;
* where they disagree, assay gives the choice documented in docs/evaluators.md (``assay`` + ``why``
  in the golden row);
* json_match exists only in openevals: assay == openevals except the documented differences.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from assay.evaluators import EditDistance, ExactMatch, JsonMatch

GOLDEN = Path(__file__).resolve().parent / "golden" / "heuristics.json"


@cache
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def _is_score(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _expected(row: dict[str, Any]) -> tuple[float | None, str]:
    o, p = row["O"], row["P"]
    if _is_score(o) and _is_score(p) and o == pytest.approx(p):
        if "assay" in row:  # a documented choice must not contradict agreeing references
            assert row["assay"] == pytest.approx(o), f"golden row contradicts agreeing references: {row}"
        return o, "openevals and potato agree"
    assert "assay" in row, f"references disagree but the golden row has no documented choice: {row}"
    return row["assay"], row["why"]


def _ids(section: str) -> list[str]:
    return [
        f"{section}-{i}-{r['outputs']!r}-vs-{r['reference_outputs']!r}"[:80] for i, r in enumerate(golden()[section])
    ]


@pytest.mark.parametrize("row", golden()["exact_match"], ids=_ids("exact_match"))
def test_exact_match(row: dict[str, Any]) -> None:
    expected, why = _expected(row)
    got = ExactMatch().evaluate(outputs=row["outputs"], reference_outputs=row["reference_outputs"]).score
    assert got == (None if expected is None else pytest.approx(expected)), why


@pytest.mark.parametrize("row", golden()["edit_distance"], ids=_ids("edit_distance"))
def test_edit_distance(row: dict[str, Any]) -> None:
    expected, why = _expected(row)
    out, ref = row["outputs"], row["reference_outputs"]
    if ref == "" and isinstance(out, str) and out.strip():
        # documented choice (issue 11): an empty reference text against an answer is "no
        # reference" (None); openevals and potato score it 0.0
        expected, why = None, "empty reference text: no reference"
    got = EditDistance().evaluate(outputs=out, reference_outputs=ref).score
    assert got == (None if expected is None else pytest.approx(expected)), why


@pytest.mark.parametrize("row", golden()["json_match"], ids=[f"json-{i}" for i in range(len(golden()["json_match"]))])
def test_json_match(row: dict[str, Any]) -> None:
    expected = row["assay"] if "assay" in row else row["O"]
    assert isinstance(expected, dict), f"openevals raised: {expected}"
    results = JsonMatch(**row["params"]).evaluate(outputs=row["outputs"], reference_outputs=row["reference_outputs"])
    got = {r.key: r.score for r in results}
    assert got == pytest.approx(expected), row.get("why", "assay == openevals")


def test_the_documented_differences_are_few() -> None:
    rows = golden()["json_match"]
    differing = [r for r in rows if "assay" in r]
    assert len(differing) <= 10 < len(rows) - len(differing)
