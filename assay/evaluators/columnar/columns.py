"""One result key's results as Arrow columns (what every columnar form returns)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa


class KeyColumns:
    """One result key's results for every row of a batch (Arrow arrays of the batch's length).

    ``score``: float64, null where not scored; ``value``: the raw value, bool (pass/fail checks)
    or string (``tool_call_accuracy``'s ``"2/3"``), null where not scored; ``passed``: bool,
    ``score >= threshold``, null where not scored; ``comment``: string (built on first use: the
    scores cost a few array operations, the sentences of failing rows are Python); ``error``:
    string, or None when no row has an error (the object path's ``Result`` fields, column by
    column)."""

    __slots__ = ("_comment", "error", "key", "passed", "score", "threshold", "value")

    def __init__(
        self,
        key: str,
        score: pa.Array,
        value: pa.Array,
        passed: pa.Array,
        comment: pa.Array | Callable[[], pa.Array],
        error: pa.Array | None = None,
        threshold: float = 0.5,
    ) -> None:
        self.key = key
        self.score = score
        self.value = value
        self.passed = passed
        self._comment = comment
        self.error = error
        self.threshold = threshold

    @property
    def comment(self) -> pa.Array:
        if callable(self._comment):
            self._comment = self._comment()
        return self._comment

    def value_text(self) -> pa.Array:
        """``value`` as the Parquet schema writes it (JSON text for non-strings: ``true``)."""
        if pa.types.is_boolean(self.value.type):
            import pyarrow.compute as pc

            from assay.connectors.arrow_arrays import text_scalar

            text = pc.if_else(self.value, text_scalar("true"), text_scalar("false"))
            return text.cast(pa.string())
        return self.value.cast(pa.string())

    def struct(self) -> pa.StructArray:
        """``struct<score, value (text), passed, comment, error>``."""
        n = len(self.score)
        error = self.error if self.error is not None else pa.nulls(n, pa.string())
        return pa.StructArray.from_arrays(
            [self.score, self.value_text(), self.passed, self.comment, error],
            names=["score", "value", "passed", "comment", "error"],
        )
