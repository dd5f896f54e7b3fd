"""Memory of a multi-row export read from Parquet: the rows held while grouping cost about their
bytes (``orjson.dumps`` output, whose allocation is its whole buffer, some 8-13 times the row, was
held as it came: 575 MiB for 66,596 rows under the 64 MiB budget), and a local file's row group is
not read whole into memory before its batches are decoded."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import anyio
import pytest

from assay.connectors.exports import AssembleExports
from assay.connectors.parquet_rows import ParquetInput
from assay.connectors.parquet_source import ParquetSource
from tests.support.exports import langsmith_export, write_parquet

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_held_export_rows_cost_about_their_bytes(tmp_path: Path) -> None:
    rows, expected = langsmith_export(1500, seed=9)
    write_parquet(tmp_path / "runs.parquet", rows, row_group_size=2048)
    held: list[int] = []

    async def read() -> int:
        src = AssembleExports(ParquetSource([str(tmp_path / "runs.parquet")], batch_size=256))
        traces = 0
        async with src:
            async for batch in src.batches():
                if not traces:  # every row was held (the budget is not reached): the peak
                    held.append(tracemalloc.get_traced_memory()[1])
                traces += len(batch)
        return traces

    tracemalloc.start()
    try:
        traces = anyio.run(read)
    finally:
        tracemalloc.stop()
    assert traces == len(expected)
    payload = sum(len(r["inputs"]) + len(r["outputs"]) + 600 for r in rows)  # each row's JSON, about
    peak = held[0]
    # before: some 16 KiB a row (7,500 rows: 120+ MiB); now the rows' bytes, their bookkeeping and
    # one batch being converted
    assert peak < 2 * payload + (16 << 20), (peak >> 20, payload >> 20)


def test_a_local_row_group_is_not_read_whole_before_it_is_decoded(tmp_path: Path) -> None:
    n = 4000
    text = [os.urandom(3000).hex() for _ in range(n)]  # incompressible: ~24 MiB in one row group
    path = tmp_path / "one-group.parquet"
    pq.write_table(pa.table({"id": [str(i) for i in range(n)], "blob": text}), path, row_group_size=n)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1).total_compressed_size
    assert chunk > 20 << 20
    inp = ParquetInput(str(path), str(path))
    pf = inp.open()
    before = pa.total_allocated_bytes()
    most = 0
    for _, batch in inp.batches(pf, inp.row_groups, batch_rows=256):
        most = max(most, pa.total_allocated_bytes() - before - batch.nbytes)
    assert most < chunk * 3 // 4, (most >> 20, chunk >> 20)  # pre-buffered: the whole chunk and more
