"""The columnar scorer's public objects: :func:`plan`, :class:`ColumnarPlan`, :class:`ColumnarScores`,
:class:`KeyColumns` (see the package docstring)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from assay.evaluators.columnar.columns import KeyColumns
from assay.evaluators.columnar.forms import Form, form_for
from assay.evaluators.columnar.view import BatchView, Layout, layout_of

if TYPE_CHECKING:
    from assay.evaluators.base import BaseEvaluator

#: The environment switch: ``ASSAY_COLUMNAR=0`` (or ``off``, ``false``, ``no``) scores every batch
#: with the object path, as before this package existed (for comparisons and as an escape hatch).
ENV_SWITCH = "ASSAY_COLUMNAR"


def columnar_enabled() -> bool:
    """Whether the engine may score batches by columns (``ASSAY_COLUMNAR`` is not 0/off/false/no).

    >>> import os; os.environ.pop("ASSAY_COLUMNAR", None) and None; columnar_enabled()
    True
    """
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "off", "false", "no"}


@dataclass(slots=True)
class ColumnarScores:
    """What :meth:`ColumnarPlan.score` returns for one batch."""

    num_rows: int
    results: dict[str, KeyColumns]
    """Result key → its columns, in the evaluators' order."""
    fallback: pa.BooleanArray | None = None
    """Rows the columnar forms cannot decide as the object path would (a null or empty message
    list, a role alias, a call without a name, arguments that are not a JSON object…): their
    results here are placeholders; score those rows with the object path (every key). None when
    every row was decided."""

    @property
    def keys(self) -> list[str]:
        return list(self.results)

    def fallback_rows(self) -> list[int]:
        """The indices of the :attr:`fallback` rows."""
        if self.fallback is None:
            return []
        import numpy as np

        from assay.connectors.arrow_arrays import to_numpy

        mask = to_numpy(self.fallback)
        return [int(i) for i in np.flatnonzero(mask)]

    def result_batch(self) -> pa.RecordBatch:
        """One struct column per key (:meth:`KeyColumns.struct`), named by the key."""
        keys = list(self.results)
        return pa.RecordBatch.from_arrays([self.results[k].struct() for k in keys], names=keys)


@dataclass(slots=True)
class ColumnarPlan:
    """The columnar forms of a run's evaluators for one schema (from :func:`plan`)."""

    layout: Layout
    forms: list[Form]
    object_evaluators: list[BaseEvaluator[Any]] = field(default_factory=list)
    """Evaluators with no columnar form (left to the object path, per key; ``partial=True``)."""

    @property
    def keys(self) -> list[str]:
        """The result keys scored by columns, in evaluator order."""
        return [f.key for f in self.forms]

    @property
    def columns(self) -> list[str]:
        """The top-level source columns the plan reads (select only these: Spark, Ray, Parquet)."""
        return self.layout.columns(self._needs())

    def parquet_columns(self, parquet_schema: Any) -> list[str]:
        """The Parquet leaf paths to read (``pq.ParquetFile(...).schema``): only the message
        fields the forms need (roles, tool names; arguments and text only when a form reads them)."""
        return self.layout.parquet_columns(parquet_schema, self._needs())

    def _needs(self) -> set[str]:
        needs: set[str] = set()
        for f in self.forms:
            needs |= f.needs
        return needs

    def score(self, batch: pa.RecordBatch) -> ColumnarScores:
        """Score every row of ``batch`` with every columnar form."""
        view = BatchView(batch, self.layout, self._needs())
        results = {f.key: f.score(view) for f in self.forms}
        return ColumnarScores(batch.num_rows, results, view.fallback_mask())


def plan(evaluators: Sequence[BaseEvaluator[Any]], schema: pa.Schema, *, partial: bool = False) -> ColumnarPlan | None:
    """The columnar plan of ``evaluators`` over batches of ``schema``, or None.

    None when the schema is not one the forms read, when no evaluator has a columnar form, or
    (unless ``partial``) when some evaluator has none. With ``partial=True`` those evaluators are
    listed in :attr:`ColumnarPlan.object_evaluators` for the object path to score (per key)."""
    layout = layout_of(schema)
    if layout is None:
        return None
    forms: list[Form] = []
    rest: list[BaseEvaluator[Any]] = []
    for ev in evaluators:
        form = form_for(ev, layout)
        if form is None:
            rest.append(ev)
        else:
            forms.append(form)
    if not forms or (rest and not partial):
        return None
    return ColumnarPlan(layout, forms, rest)
