"""Write tests/conformance/golden/heuristics.json: reference results for exact_match, edit_distance
and json_match.

Run with the python that has openevals and potato installed (never a dependency of assay):

    /tmp/refvenv/bin/python tests/conformance/generate_heuristics_golden.py

Every case stores its inputs and each reference library's result: ``O`` openevals, ``P`` potato
(a score, or ``"E: <error>"`` when the library raised). Where the references disagree, or where
assay deliberately differs from the only reference (json_match), the case also carries
``assay`` (the expected assay score; None = not scored) and ``why`` (the documented reason, see
docs/evaluators.md). The test (test_reference_heuristics.py) needs only this file.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "golden" / "heuristics.json"

# (outputs, reference_outputs, assay expectation where the references disagree, why)
EXACT: list[tuple[Any, Any, Any, str]] = [
    ("Paris", "Paris", None, ""),
    ("Paris", "paris", None, ""),
    ("a", "b", None, ""),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, 1.0, "dict key order never matters (potato compares reprs)"),
    ({"a": [1, 2]}, {"a": [2, 1]}, None, ""),
    ([1, 2, 3], [1, 2, 3], None, ""),
    ({"x": {"y": [1, {"z": None}]}}, {"x": {"y": [1, {"z": None}]}}, None, ""),
    (42, 42, None, ""),
    (True, True, None, ""),
    (1, "1", 1.0, "text equals the number whose text it is (potato); type_strict=True gives openevals"),
    ("1", 1, 1.0, "text equals the number whose text it is (potato); type_strict=True gives openevals"),
    (1, 1.0, None, ""),
    ("True", True, 1.0, "text equals the number or boolean whose text it is (potato)"),
    (True, 1, 0.0, "a boolean never equals a number (potato compares 'True' with '1')"),
    ("a ", "a", 1.0, "text is stripped by default (potato); strip=False gives openevals"),
    ("\nParis\n", "Paris", 1.0, "text is stripped by default (potato); strip=False gives openevals"),
    ({"output": "x"}, "x", 0.0, "an object never equals a text (potato unwraps output/text/content/answer)"),
    ({"a": 1}, "{'a': 1}", 0.0, "an object never equals a text (potato compares its Python repr)"),
    ({"a": 1}, {"a": 1, "b": 2}, None, ""),
    ({"b": 1, "a": 2}, {"a": 2, "b": 1}, 1.0, "dict key order never matters (potato compares reprs)"),
    (None, None, None, "no reference: not scored (openevals raises, potato scores 1.0)"),
    ("x", None, None, "no reference: not scored (openevals raises, potato compares with '')"),
    ('{"a": 1}', {"a": 1}, None, ""),
    ("", "", None, ""),
]

EDIT: list[tuple[Any, Any, Any, str]] = [
    ("kitten", "sitting", None, ""),
    ("", "", None, ""),
    ("abc", "", None, ""),
    ("flaw", "lawn", None, ""),
    ("Paris", "paris", None, ""),
    ("héllo wörld", "hello world", None, ""),
    ({"a": 1}, '{"a": 1}', 1.0, "non-strings are compared as JSON text (openevals), not a Python repr"),
    ({"a": 1}, '{"a":1}', 0.875, "non-strings are compared as JSON text (openevals), not a Python repr"),
    ([1, 2, 3], "[1, 2, 3]", None, ""),
    (12345, "12345", None, ""),
    (True, "true", 1.0, "non-strings are compared as JSON text (openevals): true, not True"),
    ({"k": "éé"}, '{"k": "éé"}', 1.0, "JSON text keeps non-ASCII characters (openevals escapes them as \\u00e9)"),
    (None, "abc", 0.0, "no output is the empty text (potato); openevals raises"),
    ("abc", None, None, "no reference: not scored (openevals raises, potato compares with '')"),
]

# (outputs, reference, params, assay per-key scores where assay differs, why)
JSON: list[tuple[Any, Any, dict[str, Any], Any, str]] = []


def _json_cases() -> None:
    A = {"list_aggregator": "average"}
    table: list[tuple[Any, Any, dict[str, Any]]] = [
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, {}),
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, {"aggregator": "average"}),
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, {"aggregator": "all"}),
        ({"a": 1, "x": 5}, {"a": 1}, {"exclude_keys": ["x"]}),
        ({"a": 1}, {"a": 1, "x": 5}, {"exclude_keys": ["x"], "aggregator": "all"}),
        ({"a": 1.0, "b": [1, 2], "c": {"x": 1, "y": 2}}, {"a": 1, "b": [2, 1], "c": {"y": 2, "x": 1}}, {}),
        ({"a": None}, {}, {}),
        ({"a_b": 1, "c": 2}, {"a_b": 1, "c": 3}, {}),
        (
            [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 3]}],
            [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 4]}],
            {"aggregator": "all", "list_aggregator": "average", "exclude_keys": ["a"]},
        ),
        ([{"a": 1}], [{"a": 1}], A),
        ([{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 2}], {}),
        ([{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 2}], A),
        ([{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 2}], {"list_aggregator": "all", "aggregator": "average"}),
        ([{"id": 1, "v": "x"}, {"id": 2, "v": "y"}], [{"id": 2, "v": "y"}, {"id": 1, "v": "x"}], {}),
        (
            [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}],
            [{"id": 2, "v": "y"}, {"id": 1, "v": "x"}],
            {"list_match_mode": "ordered", **A},
        ),
        ([{"a": 1, "b": 2}, {"a": 1, "b": 3}], [{"a": 1, "b": 3}, {"a": 1, "b": 2}], A),
        (
            [{"a": 1, "b": 2}, {"a": 1, "b": 3}],
            [{"a": 1, "b": 3}, {"a": 1, "b": 2}],
            {"list_match_mode": "ordered", **A},
        ),
        ([{"a": 1, "b": 2}, {"a": 1, "b": 3}], [{"a": 1, "b": 3}, {"a": 1, "b": 2}], {"aggregator": "average", **A}),
        ([{"a": 1}, {"b": 1}, {"c": 1}], [{"a": 1}, {"b": 1}], {"aggregator": "average", **A}),
        (
            [{"a": 1}, {"b": 1}, {"c": 1}],
            [{"a": 1}, {"b": 1}],
            {"aggregator": "average", "list_match_mode": "subset", **A},
        ),
        ([{"a": 1}], [{"a": 1}, {"b": 1}, {"c": 1}], {"aggregator": "average", "list_match_mode": "subset", **A}),
        ([{"a": 1}], [{"a": 1}, {"b": 1}, {"c": 1}], {"aggregator": "average", **A}),
        ([{"a": 1}], [{"a": 1}, {"b": 1}, {"c": 1}], A),
        ([{"a": 2}], [{"a": 1}, {"a": 2, "b": 1}], A),
        ([{"a": 2}], [{"a": 1}, {"a": 2, "b": 1}], {"list_match_mode": "subset", **A}),
        ([{"a": 2}], [{"a": 1}, {"a": 2, "b": 1}], {"list_match_mode": "superset", **A}),
        ([{"a": 1}, {"a": 2, "b": 1}], [{"a": 2}], {"list_match_mode": "superset", **A}),
        ([{"a": 1}, {"a": 2, "b": 1}], [{"a": 2}], A),
        ([{"a": 1, "b": 2}], [{"a": 1, "b": 3}, {"a": 5, "b": 2}], {"list_match_mode": "subset", **A}),
        ([{"a": 1, "b": 2}, {"a": 5, "b": 3}], [{"a": 1, "b": 3}, {"a": 5, "b": 2}], A),
        ([{"a": 1, "x": 5}, {"a": 2, "x": 6}], [{"a": 2, "x": 5}, {"a": 1, "x": 6}], {"exclude_keys": ["x"], **A}),
        ([{"a": 1}, {"b": 1}], [{"a": 1}, {"b": 1}], {"list_match_mode": "ordered", **A}),
        # documented differences
        ([{"a": 1}, {"a": 1}, {"b": 1}], [{"a": 1}, {"a": 1}, {"b": 1}], A),
        ([{"a": 1}, {"b": 1}, {"a": 1}], [{"a": 1}, {"b": 1}, {"a": 2}], {"list_match_mode": "ordered", **A}),
        ([{"a": 1}], [{"a": 1}, {"a": 2}, {"c": 1}], A),
        ([{"a": 1}, {}], [{"a": 1}], A),
        ([{"a": 1}], [{"a": 1}, {}], {"aggregator": "average", **A}),
        ({}, {}, {"aggregator": "average"}),
        ({}, {}, {"aggregator": "all"}),
        ({}, {}, {}),
        ([], [], {}),
        ([], [], {"aggregator": "average", **A}),
        ([{}], [{}], {"aggregator": "average", **A}),
        ({"a": True}, {"a": 1}, {}),
    ]
    differs: dict[int, tuple[Any, str]] = {
        32: ({"json_match:a": 1.0, "json_match:b": 1.0}, "aggregated over the items where the key was compared"),
        33: ({"json_match:a": 0.5, "json_match:b": 1.0}, "aggregated over the items where the key was compared"),
        34: ({"json_match:a": 0.5, "json_match:c": 0.0}, "aggregated over the items where the key was compared"),
        35: ({"json_match:__empty_item": 0.0, "json_match:a": 1.0}, "an unpaired empty item is keyed __empty_item"),
        37: ({"json_match:average": 1.0}, "two empty objects match: average over no keys is 1"),
        41: ({"json_match:average": 1.0}, "two empty lists match: an empty list aggregates to 1"),
        42: ({"json_match:average": 1.0}, "two empty objects match: average over no keys is 1"),
        43: ({"json_match:a": 0.0}, "a boolean never equals a number (openevals: True == 1)"),
    }
    for i, (o, r, p) in enumerate(table):
        exp, why = differs.get(i, (None, ""))
        JSON.append((o, r, p, exp, why))


def _run(fn: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:
        return f"E: {type(exc).__name__}: {exc}"


def _score(value: Any) -> Any:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return value


def main() -> None:
    from openevals.exact import exact_match
    from openevals.json import create_json_match_evaluator
    from openevals.string.levenshtein import levenshtein_distance
    from potato.evaluators import EditDistance, ExactMatch

    exact_rows = []
    for o, r, assay, why in EXACT:
        row: dict[str, Any] = {
            "outputs": o,
            "reference_outputs": r,
            "O": _score(_run(lambda o=o, r=r: exact_match(outputs=o, reference_outputs=r)["score"])),
            "P": _score(_run(lambda o=o, r=r: ExactMatch().evaluate(outputs=o, reference_outputs=r).score)),
        }
        if why:
            row.update(assay=assay, why=why)
        exact_rows.append(row)

    edit_rows = []
    for o, r, assay, why in EDIT:
        row = {
            "outputs": o,
            "reference_outputs": r,
            "O": _score(_run(lambda o=o, r=r: levenshtein_distance(outputs=o, reference_outputs=r)["score"])),
            "P": _score(_run(lambda o=o, r=r: EditDistance().evaluate(outputs=o, reference_outputs=r).score)),
        }
        if why:
            row.update(assay=assay, why=why)
        edit_rows.append(row)

    _json_cases()
    json_rows = []
    for o, r, params, assay, why in JSON:

        def run_json(o: Any = o, r: Any = r, params: dict[str, Any] = params) -> Any:
            results = create_json_match_evaluator(**params)(outputs=o, reference_outputs=r)
            return {x["key"]: _score(x["score"]) for x in results}

        row = {"outputs": o, "reference_outputs": r, "params": params, "O": _run(run_json)}
        if why:
            row.update(assay=assay, why=why)
        json_rows.append(row)

    golden = {
        "generated_with": {"openevals": _version("openevals"), "potato": _version("potato-annotation")},
        "exact_match": exact_rows,
        "edit_distance": edit_rows,
        "json_match": json_rows,
    }
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(exact_rows)} exact, {len(edit_rows)} edit, {len(json_rows)} json cases")


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    main()
