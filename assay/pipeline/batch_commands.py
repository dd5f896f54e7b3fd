"""``assay batches list``, ``cancel`` and ``forget``: the ledger of one run (run file, ``--ds``,
``--shard``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson

from assay.config import RunConfig
from assay.exceptions import ConfigError
from assay.judges.batch.api import BatchNotFound
from assay.judges.batch.ledger import CREATING, LOST, OPEN, Ledger
from assay.judges.batch.rounds import batch_judges, lost_message
from assay.judges.guard import Secrets
from assay.judges.providers import batcher_for
from assay.pipeline.batch_run import ledger_path


def _ledger(config: RunConfig, shard: tuple[int, int] | None) -> Ledger:
    if not batch_judges(config):
        raise ConfigError("the run file declares no judge with mode: batch")
    path = ledger_path(config, shard)
    if not path.exists():
        raise ConfigError(f"no batch ledger for this run yet ({path}): nothing was submitted")
    return Ledger(path)


def list_batches(config: RunConfig, shard: tuple[int, int] | None, *, as_json: bool = False) -> None:
    """Print every batch of the ledger and the lines per state."""
    ledger = _ledger(config, shard)
    try:
        batches = ledger.batches()
        counts = ledger.counts()
    finally:
        ledger.close()
    out = sys.stdout
    if as_json:
        for b in batches:
            out.write(orjson.dumps(b).decode() + "\n")
        return
    out.write(f"{'judge':<14} {'batch':<40} {'state':<10} {'provider state':<15} {'requests':>9}\n")
    for b in batches:
        out.write(
            f"{b['judge']:<14} {b['provider_id'] or b['id']:<40} {b['state']:<10} "
            f"{b['provider_state'] or '-':<15} {b['lines']:>9,}\n"
        )
    out.write("lines: " + (", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) or "none") + "\n")


async def cancel_batches(config: RunConfig, shard: tuple[int, int] | None) -> int:
    """Ask the provider to cancel every open batch; how many were asked."""
    ledger = _ledger(config, shard)
    configs = batch_judges(config)
    asked = 0
    try:
        for b in ledger.batches(states=[OPEN, CREATING]):
            cfg = configs.get(b["judge"])
            if cfg is None or not b["provider_id"]:
                continue
            env = cfg.resolved_key_env()
            key = os.environ.get(env) if env else None
            try:
                async with batcher_for(b["judge"], cfg, key, Secrets()) as client:
                    remote = await client.cancel(b["provider_id"])
            except BatchNotFound:  # nothing left to cancel: its lines go again at the next run
                put_back = ledger.lose(b["id"], cfg.batch.max_attempts, "no longer exists at the provider")
                print(
                    f"assay: {lost_message(b['provider_id'], b['judge'], put_back, cfg.batch.max_attempts)}",
                    file=sys.stderr,
                )
                continue
            ledger.update_batch(b["id"], remote.state, orjson.dumps(remote.counts).decode())
            print(f"assay: cancel requested for batch {remote.id} ({b['judge']}): {remote.state}", file=sys.stderr)
            asked += 1
    finally:
        ledger.close()
    if not asked:
        print("assay: no open batch to cancel", file=sys.stderr)
    return asked


def forget_batch(config: RunConfig, shard: tuple[int, int] | None, batch_id: str) -> None:
    """Mark a batch lost without asking the provider (it no longer knows it, or it answers for
    another workspace): its unanswered lines are submitted again by the next ``assay run``."""
    ledger = _ledger(config, shard)
    configs = batch_judges(config)
    try:
        row = ledger.find_batch(batch_id)
        if row is None:
            known = ", ".join(b["provider_id"] or b["id"] for b in ledger.batches()) or "none"
            raise ConfigError(f"batch {batch_id!r} is not in this run's ledger ({ledger.path}; its batches: {known})")
        if row["state"] == LOST:
            print(f"assay: batch {batch_id} is marked lost already", file=sys.stderr)
            return
        if row["state"] not in (OPEN, CREATING):
            raise ConfigError(
                f"batch {batch_id} was collected already ({row['state']}): its answers are in the ledger; "
                "nothing to forget"
            )
        cfg = configs.get(row["judge"])
        max_attempts = cfg.batch.max_attempts if cfg is not None else 1
        put_back = ledger.lose(row["id"], max_attempts, "forgotten (assay batches forget)")
    finally:
        ledger.close()
    print(
        f"assay: batch {batch_id} ({row['judge']}) marked lost in the ledger; its {put_back:,} unanswered requests "
        f"are submitted again by the next `assay run` of this run file and --ds (the lost batch counts as one of "
        f"their max_attempts {max_attempts})",
        file=sys.stderr,
    )


async def open_batches_finished(config: RunConfig, shard: tuple[int, int] | None = None) -> dict[str, Any]:
    """Ask the provider about every open batch of the run's ledger (no ledger change, nothing
    collected): ``{"finished": bool, "open": n, "done": n}``. For a waiter that frees its worker
    while the batches run (the Airflow trigger): when ``finished``, run the same command again."""
    path = ledger_path(config, shard)
    if not path.exists():
        return {"finished": True, "open": 0, "done": 0}
    ledger = Ledger(path)
    try:
        rows = ledger.batches(states=[OPEN, CREATING])
    finally:
        ledger.close()
    configs = batch_judges(config)
    done = 0
    for b in rows:
        cfg = configs.get(b["judge"])
        if cfg is None or not b["provider_id"]:
            continue  # a batch being created: the next run resolves it
        env = cfg.resolved_key_env()
        key = os.environ.get(env) if env else None
        try:
            async with batcher_for(b["judge"], cfg, key, Secrets()) as client:
                remote = await client.get(b["provider_id"])
        except BatchNotFound:  # gone at the provider: the next run marks it lost and submits again
            done += 1
            continue
        done += remote.done
    return {"finished": done == len(rows), "open": len(rows), "done": done}
