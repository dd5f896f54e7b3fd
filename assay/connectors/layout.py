"""The layout of an output, spelled once: the names of the files it holds, the part grammar, and
how a file is written atomically. Sinks, the engine, ``assay merge``, the report, the push step and
the pytest plugin import these names; none spells them.

A directory of results (local, or an ``s3://`` prefix)::

    part-SSSSS-NNNNN.jsonl[.gz|.zst]   rows (.parquet for Parquet rows): writer SSSSS, its part NNNNN
    _dead_letter/dead-SSSSS-NNNNN.jsonl   records that could not be scored
    _SUMMARY.json                      the summary of the whole output
    _SUMMARY.shard-I-of-N.json         the summary of shard I of a ``--shard I/N`` run (merged by
                                       ``assay merge`` into ``_SUMMARY.json``)
    _SUCCESS                           written last, only beside a whole output that passed
    _staging/                          a run that started over beside a whole output: its parts
                                       until they are swapped in
    _push_dead_letter/                 results a push target refused

A single-file output (``out.jsonl.gz``) has its summary beside it, ``out.jsonl.gz._SUMMARY.json``;
one day of a Delta table has ``_summaries/ds=D/_SUMMARY.json`` and ``_dead_letter/ds=D/``.

A file being written is a hidden temp file beside its final name (:func:`temp_path`:
``.NAME.tmp``, or ``.NAME.PID.tmp`` when processes share the folder), fsynced and renamed into
place when complete (:func:`write_atomic`, :func:`write_json_atomic`), so a reader never sees half
a file.

>>> part_name("part", 1, 2, ".jsonl.gz"), shard_summary_name(0, 4), summary_beside("out.jsonl")
('part-00001-00002.jsonl.gz', '_SUMMARY.shard-0-of-4.json', 'out.jsonl._SUMMARY.json')
>>> SHARD_SUMMARY.match("_SUMMARY.shard-0-of-4.json").groups()
('0', '4')
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson

from assay.processes import pid_alive

SUMMARY = "_SUMMARY.json"
"""The summary of a whole output (of one day of a Delta table)."""
SUCCESS = "_SUCCESS"
"""The marker of a whole output that passed: written last, removed first when a run starts over."""
STAGING = "_staging"
"""The staging area beside an output (a start-over's parts until they are swapped in; the staged
rows of the shards of a Delta day)."""
DEAD_LETTER = "_dead_letter"
"""The dead letters inside a directory or prefix of results (per day of a Delta table)."""
SUMMARIES = "_summaries"
"""The per-day summaries of a Delta table (``_summaries/ds=D/``)."""
PUSH_DEAD_LETTER = "_push_dead_letter"
"""The results a push target refused, beside the output."""

RESULTS_PREFIX = "part"
"""The first word of a results part's name."""
DEAD_PREFIX = "dead"
"""The first word of a dead-letter part's name."""

SHARD_SUMMARY = re.compile(r"^_SUMMARY\.shard-(\d+)-of-(\d+)\.json$")
"""A shard summary's name: shard index and shard count."""

JSONL_SUFFIX = r"\.jsonl(?:\.gz|\.zst)?"
"""The suffixes of a JSON lines part, as a pattern (:func:`part_pattern`)."""
PARQUET_SUFFIX = r"\.parquet"
"""The suffix of a Parquet part, as a pattern (:func:`part_pattern`)."""

#: The names a results directory's rows may have (the report reads these).
ROW_PATTERNS = ("part-*.jsonl", "part-*.jsonl.gz", "part-*.jsonl.zst", "part-*.parquet")


def part_prefix(prefix: str, shard: int) -> str:
    """The start of every part name writer ``shard`` gives: ``part-00001-``."""
    return f"{prefix}-{shard:05d}-"


def part_name(prefix: str, shard: int, seq: int, suffix: str) -> str:
    """Part ``seq`` of writer ``shard``: ``part-00001-00002.jsonl.gz`` (``suffix`` with its dot)."""
    return f"{part_prefix(prefix, shard)}{seq:05d}{suffix}"


def part_pattern(prefix: str, suffix: str, shard: int | None = None, *, temp: bool = False) -> re.Pattern[str]:
    """The names of the parts ``prefix`` (of writer ``shard``, else of any), ``suffix`` a pattern
    (:data:`JSONL_SUFFIX`, :data:`PARQUET_SUFFIX`); groups: the writer and the part number.
    ``temp``: their temp names too (:func:`temp_path`).

    >>> bool(part_pattern("part", JSONL_SUFFIX, 1, temp=True).match(".part-00001-00003.jsonl.gz.tmp"))
    True
    >>> part_pattern("part", PARQUET_SUFFIX).match("part-00002-00000.parquet").groups()
    ('00002', '00000')
    """
    writer = r"\d{5}" if shard is None else f"{shard:05d}"
    lead, tail = (r"\.?", r"(?:\.tmp)?") if temp else ("", "")
    return re.compile(rf"^{lead}{re.escape(prefix)}-({writer})-(\d{{5}}){suffix}{tail}$")


def shard_of(summary_name: str) -> tuple[int, int] | None:
    """``(i, N)`` of a shard summary's name (None: not one)."""
    m = SHARD_SUMMARY.match(summary_name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def shard_summary_name(index: int, count: int) -> str:
    """The file name shard ``index`` of ``count`` writes its summary under."""
    return f"_SUMMARY.shard-{index}-of-{count}.json"


def summary_beside(path: str) -> str:
    """The summary of a single-file output: ``out.jsonl._SUMMARY.json`` beside ``out.jsonl``."""
    return f"{path}.{SUMMARY}"


def temp_path(path: Path, *, per_process: bool = False) -> Path:
    """Where ``path`` is written before it is renamed into place: ``.NAME.tmp`` beside it, or this
    process's own ``.NAME.PID.tmp`` (processes sharing a folder never rename each other's)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp" if per_process else f".{path.name}.tmp")


def write_atomic(path: Path, data: bytes, *, per_process: bool = False) -> None:
    """Write ``data`` to ``path`` through its temp file (:func:`temp_path`), fsync and rename: a
    reader sees the old file or the new one, never half of one. A failure (a full disk) leaves no
    temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path, per_process=per_process)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any, *, indent: bool = True) -> None:
    """Write JSON to ``path`` atomically (:func:`write_atomic`) through this process's own temp
    file: processes that share a state dir (the members of one consumer group) never rename each
    other's half-written file; the temp files of killed processes are swept."""
    write_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2 if indent else 0, default=str), per_process=True)
    _sweep_dead_temps(path)


def _sweep_dead_temps(path: Path) -> None:
    """Remove the temp files of ``path`` that processes killed while writing it left behind."""
    prefix = f".{path.name}."
    try:
        names = [f for f in os.listdir(path.parent) if f.startswith(prefix) and f.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) : -len(".tmp")]
        if pid.isdigit() and not pid_alive(int(pid)):
            (path.parent / name).unlink(missing_ok=True)


def fsync_path(path: Path) -> None:
    """Make a file written by another writer (pyarrow's) durable before it is renamed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
