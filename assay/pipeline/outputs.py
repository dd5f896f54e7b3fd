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
import functools
import platform
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import orjson

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.layout import shard_summary_name, write_json_atomic
from assay.connectors.registry import EMPTY_SINK_STATE, PUBLISHER, SinkContext, build_sink
from assay.pipeline.checkpoint import CheckpointStore, fingerprint, fingerprint_change
from assay.pipeline.ledger import published_summary
from assay.pipeline.merge import forget_shard_summaries, open_results
from assay.pipeline.summary import RunStats, judge_totals, merge_judge_stats
from assay.pipeline.targets import (
    dead_letter_of,
    local_summary_path,
    member_key,
    results_location,
    scales_by_group,
    sink_url,
)
from assay.pipeline.writer import WriterResult
from assay.processes import INVOCATION_ID


@dataclass
class RunPlan:
    """Where a run (or one ``--shard i/N`` of it) keeps its checkpoints and how its writers start."""

    config: RunConfig
    shard: tuple[int, int] | None = None
    store: CheckpointStore = field(init=False)
    staged: bool = field(init=False, default=False)
    """This run started over while a whole output was published: its sinks write into their
    staging areas and ``publish`` swaps them in only when the new output is whole."""
    ledger: bool = field(init=False, default=False)
    """That published output is the ledger (not ``--fresh``): its current results are kept and
    only missing or stale pairs are scored (:mod:`assay.pipeline.ledger`)."""

    def __post_init__(self) -> None:
        scope = f"#shard-{self.shard[0]}-of-{self.shard[1]}" if self.shard else ""
        scope = registry.checkpoint_scope(self.config.sink) + scope  # a Delta sink: per day
        key = CheckpointStore.key_for(sink_url(self.config), scope)
        if self.shard is None and scales_by_group(self.config):
            key = member_key(self.config.state_dir, key)
        self.store = CheckpointStore(self.config.state_dir, key)

    @property
    def summary_name(self) -> str | None:
        """Shards of a ``--shard`` run write ``_SUMMARY.shard-i-of-N.json``; ``assay merge`` makes one."""
        return shard_summary_name(*self.shard) if self.shard else None

    def _sink(self, role: str, writer: int, state: Any) -> Any:
        cfg = self.config.sink if role == "results" else dead_letter_of(self.config)
        return build_sink(
            cfg,
            SinkContext(
                role,
                writer,
                state,
                self.config.s3,
                reset_only_shard=self.shard is not None,
                staged=self.staged,
                state_dir=self.config.state_dir,
            ),
        )

    async def over_published(self) -> bool:
        """Whether this run would keep a published output's current results: a whole output is
        there and the source reads its whole input again (not a topic read on from its end)."""
        if registry.rerun_state(self.config.source) is not None:
            return False
        return bool(await self._sink("results", PUBLISHER, None).whole())

    async def prepare(self, n: int, *, fresh: bool) -> dict[int, dict[str, Any]]:
        """The checkpoint state each of ``n`` writers starts from (after a reset or a consolidation)."""
        states = await self._prepare(n, fresh=fresh)
        return {w: {**st, "ledger": self.ledger} for w, st in states.items()}

    async def _prepare(self, n: int, *, fresh: bool) -> dict[int, dict[str, Any]]:
        current = fingerprint(self.config)
        meta = self.store.meta()
        self.staged = bool(meta.get("staged"))
        if self.staged and await self._settle():  # a swap a stop cut short is finished: parts in place
            self.staged = False
            self.store.save_meta({**meta, "staged": False})
        if meta.get("publishing") and await self._sink("results", PUBLISHER, None).whole():
            self.store.clear()  # the last run completed and published; it was stopped before forgetting this
        restart = None  # where a start-over of an interrupted run begins reading (Kafka: its origin)
        if fresh:
            restart = self._restart_state()
            self.store.clear()
        elif self.store.exists():
            changed = fingerprint_change(meta.get("fingerprint"), current)
            if changed:  # a resume would mix rows scored two ways: start over, and say why
                print(
                    "assay: starting over: the run file changed since the interrupted run"
                    f" ({', '.join(changed)}); the rows it wrote are replaced",
                    file=sys.stderr,
                    flush=True,
                )
                restart = self._restart_state()
                self.store.clear()
        if not self.store.exists():
            # a whole output stays in place until this run's output is whole (not for one shard:
            # `assay merge` publishes the shards' output)
            self.staged = self.shard is None and await self._sink("results", PUBLISHER, None).whole()
            # a source that rereads the whole input (files, S3; not a topic read on from where
            # that output ends) over a whole output: that output is the ledger
            self.ledger = self.staged and not fresh and restart is None
            self.ledger = self.ledger and registry.rerun_state(self.config.source) is None
            if self.staged and restart is None and not fresh:  # Kafka: where that output ends
                restart = registry.rerun_state(self.config.source)
            await self.reset()
            if self.shard is not None:
                await anyio.to_thread.run_sync(self._forget_shard_summaries)
            self.store.clear()
            self.store.save_meta({"fingerprint": current, "staged": self.staged, "ledger": self.ledger, "writers": n})
            if restart is None:
                return {w: {"staged": self.staged} for w in range(n)}
            self.store.save_carried({"source": restart})  # a stop before the first checkpoint keeps it
            return {w: {"staged": self.staged, "source": restart} for w in range(n)}
        self.ledger = bool(self.store.meta().get("ledger")) and self.staged
        merge = functools.partial(registry.merge_resume_states, self.config.source)
        before = int(self.store.meta().get("writers", 0))  # writers earlier attempts started
        self.store.save_meta({**self.store.meta(), "writers": max(before, n)})
        states = await self.store.consolidate(n, self._finish_orphan, _carry, merge, before)
        return {w: {**st, "staged": self.staged} for w, st in states.items()}

    def _forget_shard_summaries(self) -> None:
        """A shard starting over: the shard summaries its start makes stale (see
        :func:`~assay.pipeline.merge.forget_shard_summaries`)."""
        assert self.shard is not None
        fs = open_results(results_location(self.config), self.config.s3)
        try:
            forget_shard_summaries(fs, *self.shard)
        finally:
            if (close := getattr(fs, "close", None)) is not None:
                close()

    def _restart_state(self) -> Any:
        """The source's resume state for starting this run over (None: from the start), from the
        checkpoints of its interrupted attempts."""
        states = [st.get("source") for st in self.store.load().values()]
        return registry.restart_state(self.config.source, [*states, self.store.carried().get("source")])

    async def reset(self) -> None:
        """Start over: every sink removes what earlier attempts wrote (``_SUCCESS`` first; a
        staged run: only their staging areas)."""
        writer = self.shard[0] if self.shard else 0
        for role in ("results", "dead_letter"):
            sink = self._sink(role, writer, None)
            async with sink:
                pass

    async def _settle(self) -> bool:
        settled = False
        for role in ("results", "dead_letter"):
            async with self._sink(role, PUBLISHER, EMPTY_SINK_STATE) as sink:
                settled = await sink.settle() or settled
        return settled

    async def keep_unchanged(self, summary: dict[str, Any], pairs: dict[str, int]) -> str | None:
        """A run over a published output (its ledger) that scored nothing, dropped nothing and
        changed no row leaves that output exactly as it was: no new part, no new commit, not even
        a new summary (its staging area and checkpoint are dropped). Returns the message, or None
        when the output changes."""
        if not self.ledger or pairs.get("changed", 1) or pairs.get("dropped", 1):
            return None
        published = await anyio.to_thread.run_sync(published_summary, self.config)
        if (published or {}).get("output_format") != summary.get("output_format"):
            return None  # the sink's format, layout or part size changed: the output is written again
        # the checkpoint first: a kill between the two leaves staged parts no checkpoint names (the
        # next run starts over and clears them), never a checkpoint naming parts already discarded
        self.store.clear()
        for role in ("results", "dead_letter"):
            async with self._sink(role, PUBLISHER, EMPTY_SINK_STATE) as sink:
                await sink.discard()
        where = sink_url(self.config)
        message = (
            f"nothing to score: the {pairs.get('kept', 0)} results at {where} are current; the output stays as it was"
        )
        summary.update(status="unchanged", messages=[message], summary_path=None)
        return message

    async def keep_if_nothing_new(
        self, summary: dict[str, Any], stats: RunStats, *, status: str, error: Any
    ) -> str | None:
        """A run that started over beside a whole output and read nothing (the same Kafka command
        again, a night with no new messages) leaves that output as it was: its staging area and
        checkpoint are dropped, the summary says so (not written: the output's own stays). Returns
        the message, or None when this run has something to publish."""
        if not self.staged or status != "ok" or error is not None or stats.counts["read"]:
            return None
        self.store.clear()  # the checkpoint first, as in keep_unchanged
        for role in ("results", "dead_letter"):
            async with self._sink(role, PUBLISHER, EMPTY_SINK_STATE) as sink:
                await sink.discard()
        where = sink_url(self.config)
        message = f"nothing new to read: the whole output at {where} stays as it was"
        summary.update(status="nothing_new", exit_code=0, messages=[message], summary_path=None)
        return message

    async def _finish_orphan(self, writer: int, state: dict[str, Any]) -> dict[str, Any]:
        """Restore an absorbed writer's sinks to its commit and close them (its current part is
        finished); their states after close."""
        out: dict[str, Any] = {}
        for role, st in (state.get("sinks") or {}).items():
            if st is not None:
                sink = self._sink(role, writer, st)
                async with sink:
                    pass
                out[role] = sink.snapshot()
        return out

    def totals(self, results: list[WriterResult]) -> tuple[RunStats, dict[str, Any]]:
        """Stats and judge counts of the whole output: writers of earlier attempts that are no
        more (carried), then this attempt's writers, which ran side by side (each result is
        cumulative over that writer's own attempts)."""
        carried = self.store.carried()
        stats = RunStats()
        for part in [carried.get("stats"), *(r.stats for r in results)]:
            if isinstance(part, dict):
                stats.merge(RunStats.from_dict(part))
        for r in results:  # thresholds: this attempt's evaluators say
            for key, ks in (r.stats.get("evaluators") or {}).items():
                if key in stats.keys:
                    stats.keys[key].threshold = ks.get("threshold", 0.5)
        now = merge_judge_stats([r.judges for r in results], side_by_side=True)
        judges = merge_judge_stats([carried.get("judges") or {}, now], side_by_side=False)
        return stats, judges

    async def publish(self, summary: dict[str, Any], *, success: bool, completed: bool) -> str:
        """Finalize the rows, write the summary, then ``_SUCCESS``; forget the checkpoint once the
        run completed (a rerun then starts over; the judge cache makes that cheap)."""
        success = success and self.shard is None
        if completed:  # a stop from here on leaves a checkpoint whose parts may be published already
            self.store.save_meta({**self.store.meta(), "publishing": True})
        results = self._sink("results", PUBLISHER, EMPTY_SINK_STATE)
        dead = self._sink("dead_letter", PUBLISHER, EMPTY_SINK_STATE)
        async with results, dead:
            if self.staged and success:  # the marker goes first: both sinks swap, then it comes back
                await results.withdraw()
            await dead.publish(summary, success=success if self.staged else completed)
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
        "judges": merge_judge_stats([carried.get("judges") or {}, state.get("judges") or {}], side_by_side=False),
    }


def _sampling(config: RunConfig, stats: RunStats) -> dict[str, Any]:
    """``sampling``: per sampled key its spec and the traces it scored (absent without sampling)."""
    if not any(spec.sample for spec in config.evaluators):
        return {}
    from assay.stages.sampling import sampling_summary

    return {"sampling": sampling_summary(config, {k: v.count for k, v in stats.keys.items()})}


def build_summary(
    config: RunConfig,
    stats: RunStats,
    wall_s: float,
    run_id: str,
    started_at: dt.datetime,
    judge_stats: dict[str, Any],
    *,
    read_now: int | None = None,
) -> dict[str, Any]:
    """A run's summary without its verdict (:meth:`assay.pipeline.verdict.Verdict.record` adds it).

    ``records_per_s`` is this invocation's: the records it read (``read_now``; an earlier
    attempt's, on a resume, are not) over its wall time, as the live progress line counts."""
    data = stats.to_dict()
    counts = data["counts"]
    dead = dead_letter_of(config)
    return {
        "run_id": run_id,
        "invocation_id": INVOCATION_ID,
        "started_at": started_at.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "wall_time_s": round(wall_s, 3),
        "records_per_s": round((counts["read"] if read_now is None else read_now) / wall_s, 1) if wall_s > 0 else None,
        "counts": counts,
        "evaluators": data["evaluators"],
        "dead_letter_reasons": data["dead_letter_reasons"],
        "judges": judge_stats,
        "totals": judge_totals(judge_stats),
        **_sampling(config, stats),
        "outputs": {"results": sink_url(config), "dead_letter": getattr(dead, "path", None)},
        "output_format": fingerprint(config)["sink"],
        "source": getattr(config.source, "paths", None) or orjson.loads(config.source.model_dump_json()),
        "host": {"hostname": socket.gethostname(), "python": platform.python_version()},
    }
