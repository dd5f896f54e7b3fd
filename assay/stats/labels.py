"""Human labels: ``trace_id``, ``key``, ``label`` rows from a JSONL, CSV or Parquet file.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "labels.csv"
>>> _ = path.write_text("trace_id,key,label\\nt1,correctness,pass\\nt2,correctness,0.25\\n")
>>> load_labels(path)
{'t1': {'correctness': 'pass'}, 't2': {'correctness': '0.25'}}
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from assay.exceptions import ConfigError

__all__ = ["Labels", "load_labels"]

Labels = dict[str, dict[str, Any]]
"""trace id → result key → label."""

_COLUMNS = ("trace_id", "key", "label")


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    name = path.name.lower()
    if name.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ConfigError(f"labels {path}: reading Parquet needs pyarrow (pip install pyarrow)") from exc
        yield from pq.read_table(path, columns=list(_COLUMNS)).to_pylist()
    elif name.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f)
    else:  # JSON lines
        with open(path, "rb") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise ConfigError(f"labels {path}:{i}: not a JSON line: {exc}") from exc
                if not isinstance(row, dict):
                    raise ConfigError(f"labels {path}:{i}: expected an object with trace_id, key, label")
                yield row


def load_labels(path: str | os.PathLike[str]) -> Labels:
    """Every label of the file (a later row for the same trace and key wins); ConfigError when the
    file is missing or a row lacks a column."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"labels: no such file {p}")
    out: Labels = {}
    for i, row in enumerate(_rows(p), 1):
        missing = [c for c in _COLUMNS if row.get(c) in (None, "")]
        if missing:
            raise ConfigError(f"labels {p}: row {i} has no {', '.join(missing)} (columns: trace_id, key, label)")
        out.setdefault(str(row["trace_id"]), {})[str(row["key"])] = row["label"]
    return out
