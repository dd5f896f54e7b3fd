"""The progress line carries what a platform API source says of its reading: requests, 429s, the
pace, and (Langfuse, by default) that its public API allows as little as 30 requests a minute."""

from __future__ import annotations

import io

from assay.connectors.langfuse_api import LangfuseApiSource, LangfuseSourceConfig
from assay.connectors.phoenix_api import PhoenixApiSource, PhoenixSourceConfig
from assay.pipeline.progress import Gauges, Progress


def test_the_source_note_is_part_of_the_progress_line() -> None:
    src = LangfuseApiSource(LangfuseSourceConfig(host="http://127.0.0.1:9", ds="2026-11-21"))
    note = src.progress_note()
    assert note.startswith("langfuse API: 0 requests") and "at most 30 req/min" in note
    assert "as little as 30 on small plans" in note
    p = Progress(stream=io.StringIO(), tty=False)
    p.tick(Gauges(source_note=note))
    assert note in p.line()
    p.tick(Gauges())
    assert "API" not in p.line()


def test_an_unpaced_source_says_no_limit() -> None:
    src = PhoenixApiSource(PhoenixSourceConfig(ds="2026-11-21"))
    assert src.progress_note() == "phoenix API: 0 requests"
    assert src.describe().startswith("phoenix API phoenix:http://127.0.0.1:6006/default 2026-11-21T00:00:00Z..")
