"""Traces for the data-lake runs: agent trajectories with a reference, as rows of a Parquet file
(or JSON lines), shared by the Delta, Parquet and S3 Parquet run tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import agent_messages

N = 300


def traces(n: int = N, day: str = "") -> list[dict[str, Any]]:
    return [
        {
            "id": f"{day}t{i}",
            "messages": agent_messages(("search", {"q": i % 4}), final=f"a{i % 3}"),
            "reference": agent_messages(("search", {"q": i % 2}), final="a0"),
        }
        for i in range(n)
    ]


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 50) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
