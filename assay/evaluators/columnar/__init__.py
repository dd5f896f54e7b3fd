"""Columnar scoring: deterministic evaluators over a ``pyarrow.RecordBatch`` of traces.

Where traces arrive as Arrow (the Parquet source, Ray's ``map_batches``, Spark's ``mapInArrow``),
the checks that decide most of a night — did the agent call the right tools, in the right order,
with the right arguments — are comparisons of short integer lists: tool names are dictionary codes
shared by the agent's and the reference's calls, arguments are codes of their canonical JSON. This
package scores whole batches that way, with the object path's semantics exactly (multisets: a
repeated call counts; nulls, empty lists and defective rows as the object path treats them; a
differential test, ``tests/unit/evaluators/test_columnar_diff.py``, holds both paths equal).

The public surface is small::

    plan(evaluators, schema, *, partial=False) -> ColumnarPlan | None
    ColumnarPlan.columns            # the top-level source columns the plan reads
    ColumnarPlan.parquet_columns(s) # the Parquet leaf paths to read (``pq.ParquetFile.schema``)
    ColumnarPlan.keys               # result keys scored by columns, in evaluator order
    ColumnarPlan.object_evaluators  # evaluators left to the object path (``partial=True`` only)
    ColumnarPlan.score(batch)       -> ColumnarScores
    ColumnarScores.results[key]     -> KeyColumns(score, value, passed, comment, error)
    ColumnarScores.fallback         # rows the columns cannot decide: score them with the object path
    ColumnarScores.result_batch()   # one struct column per key (score, value as text, passed, comment, error)
    columnar_enabled()              # False when ``ASSAY_COLUMNAR=0`` (the switch that disables the path)

Which evaluators have a columnar form (``FORMS``), for a batch with an OpenAI ``messages`` column
(``list<struct<role, content, tool_calls: list<struct<id, type, function: struct<name,
arguments>>>, …>>``) and its reference column (the first of ``reference_outputs``, ``reference``,
``expected``… present, of the same type):

* ``trajectory_match``: every mode (strict — both scopes —, unordered, subset, superset,
  subsequence) with ``tool_args_match_mode`` ``ignore`` or ``exact`` and no per-tool overrides;
* ``tool_call_accuracy`` with ``args_match_mode`` ``ignore`` or ``exact`` and no overrides;
* ``tool_use`` without ``expected_args``, or with them and ``args_match_mode`` ``exact``/``ignore``;
* ``exact_match``, ``contains``, ``regex_match``, ``json_valid`` over the output text
  (a ``final_output`` text column, else the last assistant message's text) and the reference's.

Anything else (arguments compared as subsets or supersets, per-tool overrides, custom
comparators, a sampled evaluator, another schema) has no columnar form: :func:`plan` returns None
(or, with ``partial=True``, leaves those evaluators to the object path, per key).

``pyarrow`` and ``numpy`` are imported by this package only; ``import assay`` never loads it.

>>> import pyarrow as pa
>>> from assay.evaluators import TrajectoryMatch
>>> fn = pa.struct([("name", pa.string()), ("arguments", pa.string())])
>>> msg = pa.struct([("role", pa.string()), ("tool_calls", pa.list_(pa.struct([("function", fn)])))])
>>> call = lambda n: {"role": "assistant", "tool_calls": [{"function": {"name": n, "arguments": "{}"}}]}
>>> batch = pa.record_batch({"messages": pa.array([[call("a")], [call("a")]], pa.list_(msg)),
...                          "reference": pa.array([[call("a")], [call("b")]], pa.list_(msg))})
>>> p = plan([TrajectoryMatch(mode="unordered", tool_args_match_mode="ignore")], batch.schema)
>>> p.score(batch).results["trajectory_unordered_match"].score.to_pylist()
[1.0, 0.0]
"""

from __future__ import annotations

from assay.evaluators.columnar.api import ColumnarPlan, ColumnarScores, columnar_enabled, plan
from assay.evaluators.columnar.columns import KeyColumns
from assay.evaluators.columnar.forms import FORMS

__all__ = ["FORMS", "ColumnarPlan", "ColumnarScores", "KeyColumns", "columnar_enabled", "plan"]
