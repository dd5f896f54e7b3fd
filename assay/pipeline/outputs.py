"""A run's outputs as one whole: start over or resume, consolidate writers, publish the summary.

Whatever sequence of interrupted runs, resumes, ``--fresh`` and changed ``--workers`` came before,
the finished output holds exactly one row per trace:

* **no checkpoint** (a first run, a completed earlier run, ``--fresh``): start over — the sinks
  remove the outputs of earlier attempts (``_SUCCESS`` first) before any writer starts;
* **a checkpoint**: resume — each writer restores its sinks to the committed state (dropping rows
  written after it) and its source skips what is done; writers of an earlier attempt with more
  processes are consolidated first (their finished rows stay, their stats are carried);
* **publish**: the summary describes the whole output (every attempt), ``_SUCCESS`` comes last and
  only beside a whole output; the checkpoint is removed once the run completed.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from assay.config import DeadLetterConfig, RunConfig
from assay.connectors.file_sink import is_directory_target, write_json_atomic
from assay.connectors.registry import EMPTY_SINK_STATE, SinkContext, build_sink
from assay.pipeline.checkpoint import CheckpointStore, merge_ledgers
from assay.pipeline.summary import RunStats
from assay.pipeline.writer import WriterResult, merge_judge_stats
from assay.processes import pid_alive

PUBLISHER = 99_999
"""The writer number of the sink object that publishes (never one that writes parts)."""


def dead_letter_of(config: RunConfig) -> Any:
    """The dead-letter section, or its default beside the results."""
    if config.dead_letter is not None:
        return config.dead_letter
    sink = config.sink
    path = getattr(sink, "path", None)
    if isinstance(path, str) and (path.startswith("s3://") or is_directory_target(path)):
        return DeadLetterConfig(type=sink.type, path=path.rstrip("/") + "/_dead_letter/")
    if isinstance(path, str):
        p = Path(path)
        stem = p.name.split(".")[0]
        return DeadLetterConfig(path=str(p.with_name(f"{stem}.dead_letter.jsonl")))
    key = CheckpointStore.key_for(sink_url(config))
    return DeadLetterConfig(path=str(Path(config.state_dir) / "dead_letter" / key) + "/")


def scales_by_group(config: RunConfig) -> bool:
    """Whether processes running this run file side by side share nothing but a consumer group: a
    Kafka source that joins its group, writing only to Kafka topics (append-only). Such processes
    take no run lock and each keeps its own checkpoint (the group's committed offsets are where a
    rerun resumes); any other run writes outputs that one process at a time may own."""
    return (
        config.source.type == "kafka"
        and getattr(config.source, "assignment", "group") == "group"
        and config.sink.type == "kafka"
        and getattr(dead_letter_of(config), "type", None) == "kafka"
    )


def member_key(state_dir: str | Path, key: str) -> str:
    """This process's own checkpoint key under the run's ``key`` (``<key>/members/<host>-<pid>``);
    the checkpoints of members of this host that died (kill -9) are removed on the way."""
    host = socket.gethostname()
    members = Path(state_dir) / "checkpoints" / key / "members"
    if members.is_dir():
        for d in members.iterdir():
            name, _, pid = d.name.rpartition("-")
            if name == host and pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)
    return f"{key}/members/{host}-{os.getpid()}"


def local_summary_path(config: RunConfig) -> Path:
    """Where a run's ``_SUMMARY.json`` is on local disk: beside a directory's parts, named after a
    file sink (``out.jsonl._SUMMARY.json``), or under the state dir for a sink without a directory
    of its own (Kafka; ``summary_path`` overrides). For ``s3://`` sinks the summary is an object."""
    path = getattr(config.sink, "path", None)
    if isinstance(path, str) and not path.startswith("s3://"):
        if is_directory_target(path):
            return Path(path) / "_SUMMARY.json"
        return Path(f"{path}._SUMMARY.json")
    if config.summary_path:
        return Path(config.summary_path)
    return Path(config.state_dir) / "summaries" / CheckpointStore.key_for(sink_url(config)) / "_SUMMARY.json"


def sink_url(config: RunConfig) -> str:
    sink = config.sink
    path = getattr(sink, "path", None)
    if isinstance(path, str):
        return path
    return f"{sink.type}://{getattr(sink, 'bootstrap_servers', '')}/{getattr(sink, 'topic', '')}"


@dataclass
class RunPlan:
    """Where a run (or one ``--shard i/N`` of it) keeps its checkpoints and how its writers start."""

    config: RunConfig
    shard: tuple[int, int] | None = None
    store: CheckpointStore = field(init=False)

    def __post_init__(self) -> None:
        scope = f"#shard-{self.shard[0]}-of-{self.shard[1]}" if self.shard else ""
        key = CheckpointStore.key_for(sink_url(self.config), scope)
        if self.shard is None and scales_by_group(self.config):
            key = member_key(self.config.state_dir, key)
        self.store = CheckpointStore(self.config.state_dir, key)

    @property
    def summary_name(self) -> str | None:
        """Shards of a ``--shard`` run write ``_SUMMARY.shard-i-of-N.json``; ``assay merge`` makes one."""
        return f"_SUMMARY.shard-{self.shard[0]}-of-{self.shard[1]}.json" if self.shard else None

    def _sink(self, role: str, writer: int, state: Any) -> Any:
        cfg = self.config.sink if role == "results" else dead_letter_of(self.config)
        return build_sink(
            cfg,
            SinkContext(role, writer, state, self.config.s3, reset_only_shard=self.shard is not None),
        )

    async def prepare(self, n: int, *, fresh: bool) -> dict[int, dict[str, Any]]:
        """The checkpoint state each of ``n`` writers starts from (after a reset or a consolidation)."""
        if fresh:
            self.store.clear()
        prior = self.store.load()
        if not prior:
            await self.reset()
            self.store.clear()
            return {}
        carried = self.store.carried()
        source_state = merge_ledgers(p.get("source") for p in prior.values())
        if carried.get("source") is not None:
            source_state = merge_ledgers([source_state, carried["source"]])
        states: dict[int, dict[str, Any]] = {}
        for w, st in sorted(prior.items()):
            if w < n:
                states[w] = {**st, "source": source_state}
                continue
            await self._finish_orphan(st)  # its finished rows stay in the output; its counts are carried
            carried = _carry(carried, st)
            self.store.remove_writer(w)
        if carried:
            carried["source"] = source_state
            self.store.save_carried(carried)
        for w in range(n):
            states.setdefault(w, {"source": source_state})
        return states

    async def reset(self) -> None:
        """Start over: every sink removes what earlier attempts wrote (``_SUCCESS`` first)."""
        writer = self.shard[0] if self.shard else 0
        for role in ("results", "dead_letter"):
            sink = self._sink(role, writer, None)
            async with sink:
                pass

    async def _finish_orphan(self, state: dict[str, Any]) -> None:
        sinks = state.get("sinks") or {}
        for role in ("results", "dead_letter"):
            st = sinks.get(role)
            if st is not None:
                async with self._sink(role, int(state.get("writer", 0)), st):
                    pass  # restored to its commit and closed: its current part is finished

    def totals(self, results: list[WriterResult]) -> tuple[RunStats, dict[str, Any]]:
        """Stats and judge counts of the whole output: carried writers plus this attempt's."""
        carried = self.store.carried()
        stats = RunStats()
        judges: dict[str, Any] = {}
        parts = [carried] if carried else []
        parts += [{"stats": r.stats, "judges": r.judges} for r in results]
        for part in parts:
            if isinstance(part.get("stats"), dict):
                stats.merge(RunStats.from_dict(part["stats"]))
            judges = merge_judge_stats(judges, part.get("judges") or {})
        return stats, judges

    async def publish(self, summary: dict[str, Any], *, success: bool, completed: bool) -> str:
        """Finalize the rows, write the summary, then ``_SUCCESS``; forget the checkpoint once the
        run completed (a rerun then starts over; the judge cache makes that cheap)."""
        success = success and self.shard is None
        dead = self._sink("dead_letter", PUBLISHER, EMPTY_SINK_STATE)
        async with dead:
            await dead.publish(summary, success=completed)
        results = self._sink("results", PUBLISHER, EMPTY_SINK_STATE)
        async with results:
            where: str | None = await results.publish(summary, success=success, summary_name=self.summary_name)
        if where is None:  # a sink without a directory of its own (Kafka)
            target = local_summary_path(self.config)
            if self.summary_name:
                target = target.with_name(self.summary_name)
            write_json_atomic(target, summary)
            where = str(target)
        if completed:
            self.store.clear()
        return where


def _carry(carried: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    stats = RunStats()
    for part in (carried.get("stats"), state.get("stats")):
        if isinstance(part, dict):
            stats.merge(RunStats.from_dict(part))
    return {
        "stats": stats.to_dict(),
        "judges": merge_judge_stats(carried.get("judges") or {}, state.get("judges") or {}),
    }


def build_summary(
    config: RunConfig,
    stats: RunStats,
    status: str,
    wall_s: float,
    run_id: str,
    started_at: dt.datetime,
    judge_stats: dict[str, Any],
) -> dict[str, Any]:
    data = stats.to_dict()
    counts = data["counts"]
    js = judge_stats.values()
    judges_total = {
        "requests": sum(int(j.get("requests", 0)) for j in js),
        "rate_limited_429": sum(int(j.get("http_429", 0)) for j in js),
        "server_errors_5xx": sum(int(j.get("http_5xx", 0)) for j in js),
        "timeouts": sum(int(j.get("timeouts", 0)) for j in js),
        "cached": sum(int(j.get("cached", 0)) for j in js),
        "retries": sum(int(j.get("retries", 0)) for j in js),
        "errors": sum(int(j.get("errors", 0)) for j in js),
        "input_tokens": sum(int(j.get("input_tokens", 0)) for j in js),
        "output_tokens": sum(int(j.get("output_tokens", 0)) for j in js),
        "cost_usd": round(sum(float(j.get("cost_usd", 0.0)) for j in js), 8),
    }
    dead = dead_letter_of(config)
    return {
        "run_id": run_id,
        "status": status,
        "started_at": started_at.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "wall_time_s": round(wall_s, 3),
        "records_per_s": round(counts["read"] / wall_s, 1) if wall_s > 0 else None,
        "counts": counts,
        "evaluators": data["evaluators"],
        "judges": judge_stats,
        "totals": judges_total,
        "outputs": {"results": sink_url(config), "dead_letter": getattr(dead, "path", None)},
        "source": getattr(config.source, "paths", None) or orjson.loads(config.source.model_dump_json()),
        "host": {"hostname": socket.gethostname(), "python": platform.python_version()},
    }
