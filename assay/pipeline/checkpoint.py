"""Checkpoints: what each writer of a run had made durable at its last commit, so that the same
command resumes exactly (see :mod:`assay.pipeline.commit` and :mod:`assay.pipeline.outputs`).

The engine never interprets a source's or a sink's state; it only stores it, and merges the
ledger-shaped source states of several writers when a resume changes ``--workers``.

Parts belong to writer numbers, not to processes. When a resume runs fewer writers than an earlier
attempt, the writers it does not run are *absorbed* (:meth:`CheckpointStore.consolidate`): their
sinks are restored to their last commit and closed (their finished parts stay in the output), and
their sink states, stats and judge counts move into ``carried.json``. A later attempt that runs
writer ``i`` again starts it from that carried sink state: it keeps writer ``i``'s earlier parts
and numbers its new ones after them, so no attempt ever deletes a part whose positions a
checkpoint counts as done, whatever sequence of worker counts, kills and signals came before.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from assay.connectors.file_sink import os_error_message
from assay.connectors.layout import write_json_atomic
from assay.connectors.state_keys import SinkKey
from assay.exceptions import ConnectorError
from assay.paths import safe_join


def _write(path: Path, data: dict[str, Any]) -> None:
    """A checkpoint file, or a ConnectorError naming it (``state dir: cannot write PATH: no space
    left on device``): a full or read-only state dir stops the run with one clear message."""
    try:
        write_json_atomic(path, data, indent=False)
    except OSError as exc:
        raise ConnectorError(f"state dir: {os_error_message(str(path), exc)}") from exc


class CheckpointStore:
    """The checkpoints of one run (one sink), one file per writer process.

    ``<state_dir>/checkpoints/<key>/writer-<i>.json`` holds what writer ``i`` had made durable at
    its last commit: the source's resume state, every sink's state, the cumulative stats and judge
    counts. ``carried.json`` keeps the stats of writers of an earlier attempt with more processes,
    whose rows stay in the output (a resume with another ``--workers``). The files are replaced
    atomically (temp file, fsync, rename).
    """

    def __init__(self, state_dir: str | Path, key: str) -> None:
        self.key = key
        self.dir = safe_join(Path(state_dir), "checkpoints", key)

    key_for = staticmethod(SinkKey.key_for)

    def writer_path(self, writer: int) -> Path:
        return safe_join(self.dir, f"writer-{writer}.json")

    def load(self) -> dict[int, dict[str, Any]]:
        """Every writer's last checkpoint (empty: nothing to resume). A writer file that
        ``carried.json`` already absorbed (a stop between the two writes) is removed, not loaded."""
        out: dict[int, dict[str, Any]] = {}
        if not self.dir.is_dir():
            return out
        absorbed = set(self.carried().get("absorbed") or [])
        for f in self.dir.glob("writer-*.json"):
            try:
                raw = f.read_bytes()
                if _digest(raw) in absorbed:
                    f.unlink(missing_ok=True)
                    continue
                state = orjson.loads(raw)
                state["_digest"] = _digest(raw)
                out[int(f.stem.split("-", 1)[1])] = state
            except (ValueError, OSError, orjson.JSONDecodeError):
                continue  # a torn file cannot exist (atomic rename); anything else is not ours
        return out

    def exists(self) -> bool:
        """Whether there is anything to resume: a writer's checkpoint or absorbed writers."""
        return bool(self.load()) or bool(self.carried())

    async def consolidate(
        self,
        n: int,
        finish: Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]],
        carry: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]],
        merge_source: Callable[[Iterable[Any]], Any],
        started: int = 0,
    ) -> dict[int, dict[str, Any]]:
        """The state each of ``n`` writers resumes from (see the module docs).

        ``finish(writer, state)`` restores an absorbed writer's sinks to its checkpoint, closes
        them and returns their states after close (``{role: state}``); ``carry(carried, state)``
        adds its stats and judge counts to the carried ones; ``merge_source(states)`` is the source
        connector's merge of several writers' resume states (files and S3: the union of their
        ledgers), which every resumed writer gets (it skips what any writer made durable).
        ``started``: how many writers earlier attempts ran; one that is not run now and left no
        checkpoint (stopped before its first) may still have finished parts: they are removed
        (its sinks restored to nothing)."""
        prior = self.load()
        carried = self.carried()
        source_state = merge_source([*(p.get("source") for p in prior.values()), carried.get("source")])
        for w, st in sorted(prior.items()):
            if w < n:
                continue
            sinks = await finish(w, st)
            carried = {
                **carried,
                **carry(carried, st),
                "source": source_state,
                "sinks": {**(carried.get("sinks") or {}), str(w): sinks},
                "absorbed": [*(carried.get("absorbed") or []), st["_digest"]],
            }
            self.save_carried(carried)  # first: a stop before the removal finds the file absorbed
            self.remove_writer(w)
        for w in range(n, started):
            if w in prior or str(w) in (carried.get("sinks") or {}):
                continue
            sinks = await finish(w, {"sinks": {"results": _NOTHING, "dead_letter": _NOTHING}})
            carried = {**carried, "sinks": {**(carried.get("sinks") or {}), str(w): sinks}}
            self.save_carried(carried)
        if carried:
            carried["source"] = source_state
            self.save_carried(carried)
        absorbed_sinks = carried.get("sinks") or {}
        states: dict[int, dict[str, Any]] = {}
        for w in range(n):
            if w in prior:
                st = {k: v for k, v in prior[w].items() if k != "_digest"}
                states[w] = {**st, "source": source_state}
            elif str(w) in absorbed_sinks:  # writer w of an earlier attempt: continue its parts
                states[w] = {"source": source_state, "sinks": absorbed_sinks[str(w)]}
            else:
                states[w] = {"source": source_state}
        return states

    def save(self, writer: int, state: dict[str, Any]) -> None:
        _write(self.writer_path(writer), state)

    def remove_writer(self, writer: int) -> None:
        self.writer_path(writer).unlink(missing_ok=True)

    def carried(self) -> dict[str, Any]:
        try:
            return dict(orjson.loads((self.dir / "carried.json").read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            return {}

    def save_carried(self, data: dict[str, Any]) -> None:
        _write(self.dir / "carried.json", data)

    def meta(self) -> dict[str, Any]:
        """What the run that wrote these checkpoints was (``run.json``: its fingerprint)."""
        try:
            return dict(orjson.loads((self.dir / "run.json").read_bytes()))
        except (OSError, orjson.JSONDecodeError, TypeError, ValueError):
            return {}

    def save_meta(self, data: dict[str, Any]) -> None:
        _write(self.dir / "run.json", data)

    def clear(self) -> None:
        """Forget the run (it completed, or ``--fresh``)."""
        if self.dir.is_dir():
            for f in self.dir.iterdir():
                f.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.dir.rmdir()


JUDGE_ROW_KEYS = ("provider", "model", "deployment", "base_url", "temperature", "seed", "max_tokens", "extra_body")
"""The settings of a judge endpoint that change its answers (not its pacing, retries or prices)."""
SOURCE_ROW_KEYS = ("type", "path", "input_format", "read_mode", "topics", "topic_pattern", "group_id")
"""The settings of a source that change which records it reads and how it splits them."""


def fingerprint(config: Any) -> dict[str, str]:
    """Digests of what shapes a run's rows, per part of the run file: the evaluators and their
    params, the judges they call, ``normalize``, the source's records and the sink's format. A
    resume under another fingerprint would mix rows scored two ways in one output."""
    source = config.source.model_dump(mode="json")
    parts: dict[str, Any] = {
        "evaluators": [spec.model_dump(mode="json") for spec in config.evaluators],
        "judges": {
            name: {k: cfg.get(k) for k in JUDGE_ROW_KEYS if cfg.get(k) is not None}
            for name, cfg in sorted(config.judges.items())
        },
        "normalize": config.normalize.model_dump(mode="json"),
        "source": {k: source[k] for k in SOURCE_ROW_KEYS if k in source},
        "sink": config.sink.model_dump(mode="json"),
    }
    return {name: _digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)) for name, value in parts.items()}


def fingerprint_change(recorded: Any, current: dict[str, str]) -> list[str]:
    """The parts of the run file whose fingerprint differs from the recorded one (every part when
    none was recorded)."""
    if not isinstance(recorded, dict):
        return ["(no fingerprint recorded)"]
    return [name for name, digest in current.items() if recorded.get(name) != digest]


_NOTHING: dict[str, Any] = {"parts": [], "seq": 0, "current": None}
"""A sink state with nothing committed (restoring it removes the writer's parts)."""


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:24]
