"""Paths the engine derives from values it was given (a day, a shard, a key, a run id): every one is
built by :func:`safe_join` under a root, so no value of a run file, ``--set`` or ``${ENV}`` can
place a file outside that root.

>>> safe_join("/lake/scores", "_summaries", "ds=2026-11-21", "_SUMMARY.json")
'/lake/scores/_summaries/ds=2026-11-21/_SUMMARY.json'
>>> safe_join("s3://lake/scores/", "_dead_letter", "ds=../../x")
Traceback (most recent call last):
...
assay.exceptions.ConfigError: path 'ds=../../x' under 's3://lake/scores/': '..' is not allowed in a derived path

A day (``ds``) is validated wherever it enters (``--ds``, the run file's ``ds:``, a sink's ``ds:``)
by :func:`day_problem`, so the message names the key; :func:`safe_join` is the proof behind it.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import re
from pathlib import Path, PurePosixPath
from typing import overload

from assay.exceptions import ConfigError

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
NAME_MAX = 255
"""Bytes in one path segment (Linux, macOS); a longer derived name is refused up front."""
PATH_MAX = 4096
"""Bytes in a whole derived path (Linux ``PATH_MAX``; S3 keys stop at 1,024)."""
S3_KEY_MAX = 1024


def day_problem(value: object) -> str | None:
    """Why ``value`` is not a day ``YYYY-MM-DD`` (None: it is one); the caller names the key and
    the value.

    >>> day_problem("2026-11-21") is None, day_problem("../../X"), day_problem("2026-13-01")
    (True, 'expected a day YYYY-MM-DD', 'no such day (month must be in 1..12)')
    """
    if not isinstance(value, str) or not _DAY.fullmatch(value):
        return "expected a day YYYY-MM-DD"
    try:
        dt.date.fromisoformat(value)
    except ValueError as exc:
        return f"no such day ({exc})"
    return None


def check_ds(value: str | None) -> str | None:
    """A run's or a sink's ``ds``: a day like ``--ds`` (it names folders: ``ds=../..`` would leave
    the output); a ValueError (a model validator's) otherwise."""
    if value is not None and (problem := day_problem(value)) is not None:
        raise ValueError(problem)
    return value


def check_day(value: str, key: str) -> str:
    """``value`` when it is a day; else a :class:`ConfigError` naming ``key`` (``--ds``, ``sink.ds``).

    >>> check_day("2026-02-30", "--ds")
    Traceback (most recent call last):
    ...
    assay.exceptions.ConfigError: --ds: no such day (day is out of range for month) (got '2026-02-30')
    """
    if (problem := day_problem(value)) is not None:
        raise ConfigError(f"{key}: {problem} (got {_show(value)})")
    return value


def _is_url(root: str) -> bool:
    return "://" in root


@overload
def safe_join(root: Path, *parts: str) -> Path: ...
@overload
def safe_join(root: str, *parts: str) -> str: ...
def safe_join(root: str | Path, *parts: str) -> str | Path:
    """``root`` joined with ``parts``, proven to stay under ``root``: a part may hold ``/`` (nested
    names) but no ``..`` segment, no NUL, no leading ``/`` (or drive), no segment longer than
    :data:`NAME_MAX` bytes; for a URL root (``s3://bucket/prefix``) the same rules hold for the key.
    Anything else is a :class:`ConfigError` naming the part and the root, before any I/O.

    A :class:`~pathlib.Path` root gives a Path, a string root a string (URLs keep their scheme).
    """
    text = os.fspath(root)

    def where(part: str) -> str:
        return f"path {_show(part)} under {_show(text)}"

    for part in parts:
        if not isinstance(part, str):
            raise ConfigError(f"path part {part!r} under {_show(text)}: expected a string")
        _check_part(part, where(part))
    if _is_url(text):
        joined = posixpath.join(text.rstrip("/") + "/", *parts) if parts else text
        if len(joined.split("://", 1)[1].partition("/")[2].encode()) > S3_KEY_MAX:
            raise ConfigError(f"{where('/'.join(parts))}: longer than {S3_KEY_MAX} bytes")
        base = text.rstrip("/") + "/"
        if parts and not (joined + "/").startswith(base):  # pragma: no cover - excluded by _check_part
            raise ConfigError(f"{where('/'.join(parts))}: leaves the root")
        return joined
    base = os.path.normpath(text)
    joined = os.path.normpath(os.path.join(base, *parts)) if parts else base
    if len(os.fsencode(joined)) > PATH_MAX:
        raise ConfigError(f"{where('/'.join(parts))}: longer than {PATH_MAX} bytes")
    whole = os.path.abspath(base)
    if os.path.commonpath([whole, os.path.abspath(joined)]) != whole:  # pragma: no cover - _check_part excludes it
        raise ConfigError(f"{where('/'.join(parts))}: leaves the root")
    if isinstance(root, Path):
        return Path(joined)
    return joined + ("/" if parts and parts[-1].endswith("/") else "")


def _check_part(part: str, where: str) -> None:
    if "\x00" in part:
        raise ConfigError(f"{where}: a NUL byte is not allowed in a derived path")
    if part.startswith(("/", "\\")) or PurePosixPath(part).is_absolute() or re.match(r"^[A-Za-z]:", part):
        raise ConfigError(f"{where}: an absolute path is not allowed in a derived path")
    segments = part.replace("\\", "/").split("/")
    if ".." in segments:
        raise ConfigError(f"{where}: '..' is not allowed in a derived path")
    for seg in segments:
        if len(seg.encode()) > NAME_MAX:
            raise ConfigError(f"{where}: a name longer than {NAME_MAX} bytes")


def _show(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:60] + "…")


def partition(name: str, value: str) -> str:
    """A Hive partition folder name, ``ds=2026-11-21``; ``value`` must be a single safe segment."""
    if "/" in value or "\\" in value or value in ("", ".", ".."):
        raise ConfigError(f"partition {name}={_show(value)}: not a single folder name")
    return f"{name}={value}"


__all__ = ["NAME_MAX", "PATH_MAX", "check_day", "day_problem", "partition", "safe_join"]
