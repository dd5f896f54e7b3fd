"""The provider-facing half of batch mode: one round over a run's ledger (no ``pipeline`` import).

The run's orchestration (:mod:`assay.pipeline.batch_run`) calls these in turn:

1. :func:`recover`: a batch recorded as ``creating`` (the process died between recording and
   creating it, or its create got a 5xx or no answer) is looked for at the provider (metadata /
   listing) and adopted, or its lines go back to the queue;
2. :func:`poll` the open batches; a finished one is ingested: answers into the judge cache, every
   line's outcome into the ledger (failed and expired lines are retried up to ``max_attempts``); a
   poll or a download that fails every retry leaves its batch open for the next round;
3. the collect pass (the orchestration's): the batch judges in collect mode
   (:func:`begin_collect`, :func:`end_collect`) record every cache miss in the ledger as a line to
   submit; :func:`refetch` downloads again the answers that left the cache;
4. :func:`submit` what waits, packed by ``max_requests``, ``max_bytes`` and
   ``max_enqueued_tokens``; the ledger records each batch before it is created.

Each judge's client is its provider's batcher (``JudgeEndpoint.batcher``): a provider with a
batch API says so on its class.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from assay.config import RunConfig
from assay.exceptions import (
    ConnectorError,
    JudgeAuthError,
    JudgeError,
    JudgeRequestError,
)
from assay.judges.batch.api import (
    GET_RETRIES,
    BatchAPI,
    BatchNotFound,
    BatchRefused,
    RemoteBatch,
    get_backoff,
)
from assay.judges.batch.endpoint import BatchEndpoint
from assay.judges.batch.ledger import CREATING, OPEN, Ledger
from assay.judges.config import JudgeConfig, parse_judge_config
from assay.judges.endpoint import JudgeEndpoint

if TYPE_CHECKING:
    from assay.judges.pool import JudgePool

#: Open batches polled (and collected) at once.
POLL_CONCURRENCY = 8
#: A learned enqueued-token quota grows by this factor with every batch the provider takes.
QUOTA_GROWTH = 1.1
#: Results are written to the cache and the ledger in chunks of this many lines.
INGEST_CHUNK = 1000


def has_batch_judges(config: RunConfig) -> bool:
    """Whether any judge of the run file says ``mode: batch`` (cheap: nothing is validated)."""
    return any(isinstance(raw, dict) and raw.get("mode") == "batch" for raw in config.judges.values())


def batch_judges(config: RunConfig) -> dict[str, JudgeConfig]:
    """The run's judges with ``mode: batch``."""
    out = {}
    for name, raw in config.judges.items():
        cfg = parse_judge_config(name, raw)
        if cfg.mode == "batch":
            out[name] = cfg
    return out


def with_ledger(config: RunConfig, path: Path) -> RunConfig:
    """The config whose batch judges know the ledger (so every process of the run finds it)."""
    judges = {}
    for name, raw in config.judges.items():
        if isinstance(raw, dict) and raw.get("mode") == "batch":
            raw = {**raw, "batch": {**(raw.get("batch") or {}), "ledger": str(path)}}
        judges[name] = raw
    return config.model_copy(update={"judges": judges})


@dataclass
class BatchState:
    """One ledger's round: its judges, their batch clients, the messages for the report."""

    ledger: Ledger
    configs: dict[str, JudgeConfig]
    clients: dict[str, BatchAPI] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    """Judges whose submission the provider refused this round (enqueued-token quota, 429)."""
    started: float = field(default_factory=time.monotonic)
    first_done: int | None = None


async def open_clients(state: BatchState, pool: JudgePool, stack: contextlib.AsyncExitStack) -> None:
    """Each batch judge's client (its provider's batcher), open until ``stack`` closes."""
    for name in state.configs:
        state.clients[name] = await stack.enter_async_context(pool.get(name).batcher())


def wait_interval(state: BatchState) -> float:
    """Seconds between rounds (``--wait``): the shortest ``poll_interval_s`` of the batch judges."""
    return min(c.batch.poll_interval_s for c in state.configs.values())


def open_or_waiting(state: BatchState) -> bool:
    """Whether a batch is open (or being created) or a line waits to be submitted."""
    ledger = state.ledger
    if ledger.batches(states=[CREATING, OPEN]):
        return True
    return sum(ledger.waiting(n, c.batch.max_attempts) for n, c in state.configs.items()) > 0


def legacy_state(path: Path | None, state: BatchState) -> BatchState | None:
    """The round over an earlier assay's whole-table ledger at ``path`` (None: none to drain)."""
    if path is None or path == state.ledger.path or not path.exists():
        return None
    return BatchState(Ledger(path), state.configs, clients=state.clients, messages=state.messages)


async def drain_legacy(legacy: BatchState, state: BatchState, pool: JudgePool) -> bool:
    """The whole table's ledger of an earlier assay: its batches are recovered, polled and
    collected into the cache (their lines are never submitted from it). True once none is open
    (the file is then renamed ``*.drained``); until then this day waits, so that nothing they
    will answer is paid twice."""
    await recover(legacy)
    await poll(legacy, pool)
    ledger = legacy.ledger
    still = ledger.batches(states=[CREATING, OPEN])
    if still:
        msg = (
            f"{len(still)} batches an earlier assay submitted for the whole table (ledger {ledger.path}) are "
            "still open: their answers are collected before this day submits anything"
        )
        if msg not in state.messages:
            state.messages.append(msg)
            say(msg)
        return False
    ledger.close()
    with contextlib.suppress(OSError):
        ledger.path.rename(ledger.path.with_name(ledger.path.name + ".drained"))
    say(f"the table's earlier ledger {ledger.path} has no open batch left: renamed *.drained")
    return True


# --- recover and poll ------------------------------------------------------------------------------


async def recover(state: BatchState) -> None:
    """Batches recorded as ``creating``: adopt the one the provider has, or put the lines back."""
    ledger = state.ledger
    for row in ledger.batches(states=[CREATING]):
        client = state.clients.get(row["judge"])
        if client is None:
            continue
        try:
            remote = await client.find(row["id"], float(row["created"]), int(row["lines"]), ledger.known_provider_ids())
        except JudgeAuthError:
            raise
        except ConnectorError as exc:  # the listing is down: the batch may exist, its lines wait
            msg = f"could not look for batch {row['id']} ({row['judge']}) at the provider ({exc})"
            state.messages.append(msg + "; it is looked for again next round")
            say(state.messages[-1])
            continue
        except JudgeError as exc:  # an endpoint that cannot list its batches: the lines go again
            say(f"could not look for batch {row['id']} at the provider ({exc}); its lines are queued again")
            remote = None
        if remote is not None:
            ledger.created(row["id"], remote.id, remote.state)
            say(f"found batch {remote.id} ({row['judge']}) created by a process that stopped before recording it")
        else:
            ledger.unsend(row["id"], "never created (the process stopped first)")


async def poll(state: BatchState, pool: JudgePool) -> None:
    """Every open batch polled (and collected when finished), POLL_CONCURRENCY at a time."""
    limiter = anyio.CapacityLimiter(POLL_CONCURRENCY)

    async def one(row: dict[str, Any]) -> None:
        async with limiter:
            await _poll_one(state, pool, row)

    async with anyio.create_task_group() as tg:
        for row in state.ledger.batches(states=[OPEN]):
            tg.start_soon(one, row)


async def _poll_one(state: BatchState, pool: JudgePool, row: dict[str, Any]) -> None:
    ledger = state.ledger
    name = row["judge"]
    client = state.clients.get(name)
    if client is None:
        return
    try:
        remote = await client.get(row["provider_id"])  # (tried again on a 5xx inside)
    except ConnectorError as exc:
        _unreachable(state, row, "could not be polled", exc)
        return
    except BatchNotFound as exc:
        _lost(state, row, exc)
        if row.get("input_file"):
            await anyio.Path(row["input_file"]).unlink(missing_ok=True)
        return
    ledger.update_batch(row["id"], remote.state, orjson.dumps(remote.counts).decode())
    cfg = state.configs[name]
    if not remote.done:
        late = cfg.batch.max_wait_h is not None and time.time() - row["created"] > cfg.batch.max_wait_h * 3600
        if late and remote.state not in ("cancelling", "canceling"):
            try:
                remote = await client.cancel(remote.id)  # our own deadline: what finished is kept
            except BatchNotFound as exc:
                _lost(state, row, exc)
                return
            ledger.update_batch(row["id"], remote.state, orjson.dumps(remote.counts).decode())
            say(f"batch {remote.id} ({name}) still unfinished after {cfg.batch.max_wait_h:g} h: cancelled")
        return
    if remote.refused:
        ledger.unsend(row["id"], "token_limit_exceeded: the enqueued-token quota is full")
        others = ledger.open_tokens(name, before=float(row["created"]))  # enqueued when it was refused
        _refusal(ledger, name, int(row["tokens"]) + others)
        state.refused.add(name)
        say(f"batch {remote.id} ({name}) refused for the enqueued-token quota; its lines wait for a later batch")
    elif remote.error is not None:
        ledger.invalidate(row["id"], remote.error)
        msg = f"batch {remote.id} ({name}) failed validation: {remote.error}"
        state.messages.append(msg)
        say(msg)
    else:
        for attempt in range(GET_RETRIES + 1):  # collecting twice changes nothing: a broken download is redone
            try:
                await _ingest(state, pool.get(name), client, remote, row["id"], cfg)
                break
            except BatchNotFound as exc:  # its result files are gone: what was read is kept
                _lost(state, row, exc)
                break
            except ConnectorError as exc:
                if attempt == GET_RETRIES:
                    _unreachable(state, row, "results could not be read", exc)
                    return
                await anyio.sleep(get_backoff(cfg, attempt))
        learned = ledger.get_meta(f"quota:{name}")
        if learned is not None:  # the provider took a batch: probe a little higher again
            ledger.set_meta(f"quota:{name}", str(int(float(learned) * QUOTA_GROWTH) + 1))
    if row.get("input_file"):
        await anyio.Path(row["input_file"]).unlink(missing_ok=True)


def _lost(state: BatchState, row: dict[str, Any], exc: Exception) -> None:
    """The provider no longer knows the batch: lost in the ledger, its unanswered lines submitted
    again (the lost submission counts as one of their attempts)."""
    max_attempts = state.configs[row["judge"]].batch.max_attempts
    put_back = state.ledger.lose(
        row["id"], max_attempts, f"batch {row['provider_id']} no longer exists at the provider"
    )
    msg = lost_message(row["provider_id"] or row["id"], row["judge"], put_back, max_attempts)
    state.messages.append(msg)
    say(f"{msg} ({exc})")


def lost_message(batch: str, judge: str, put_back: int, max_attempts: int) -> str:
    return (
        f"batch {batch} ({judge}) no longer exists at the provider (deleted, another key or workspace, a reset): "
        f"marked lost in the ledger; its {put_back:,} unanswered requests are submitted again "
        f"(the lost batch counts as one of their max_attempts {max_attempts})"
    )


async def refetch(state: BatchState, pool: JudgePool) -> bool:
    """Answers the ledger knows as finished but the cache lost (deleted, expired, a damaged cache
    moved aside): the results of their batches are downloaded again (providers keep them for
    days), so nothing is paid twice. True when something changed (answers back in the cache, or
    batches whose answers cannot be had, whose lines the next collect pass submits again)."""
    changed = False
    for name, endpoint in pool.endpoints.items():
        if not isinstance(endpoint, BatchEndpoint) or not endpoint.refetch:
            continue
        client = state.clients[name]
        wanted, endpoint.refetch = sorted(endpoint.refetch), set()
        for batch in wanted:
            row = state.ledger.find_batch(batch)
            if row is None or not row["provider_id"]:
                endpoint.no_refetch.add(batch)
                changed = True
                continue
            try:
                remote = await client.get(row["provider_id"])
                got = await _reload(endpoint, client, remote)
            except BatchNotFound:
                msg = (
                    f"batch {row['provider_id']} ({name}): its answers left the judge cache and the provider no "
                    "longer keeps them; those requests are submitted (and paid) again"
                )
                state.messages.append(msg)
                say(msg)
            except ConnectorError as exc:
                _unreachable(state, row, "results could not be downloaded again", exc)
                continue
            else:
                say(f"batch {remote.id} ({name}): {got:,} answers downloaded again into the judge cache")
            endpoint.no_refetch.add(batch)
            changed = True
    return changed


async def _reload(endpoint: BatchEndpoint, client: BatchAPI, remote: RemoteBatch) -> int:
    """The answers of a collected batch into the cache again (the ledger knows them already)."""
    assert endpoint.cache is not None
    answers: list[tuple[str, dict[str, Any]]] = []
    got = 0
    async for line in client.results(remote):
        if line.outcome != "done" or line.body is None:
            continue
        try:
            reply = endpoint.provider.parse_response(line.body)
        except JudgeRequestError:
            continue
        if reply.text.strip():
            answers.append((line.custom_id, {**reply.cache_value(), "batch": remote.id}))
        if len(answers) >= INGEST_CHUNK:
            await endpoint.cache.put_many(answers)
            got += len(answers)
            answers = []
    if answers:
        await endpoint.cache.put_many(answers)
        got += len(answers)
    return got


def _unreachable(state: BatchState, row: dict[str, Any], what: str, exc: Exception) -> None:
    """A poll or a result download that failed every retry (5xx, dropped connections): the batch
    stays open and is polled again next round (the run is pending, not failed)."""
    msg = f"batch {row['provider_id']} ({row['judge']}): {what} ({exc}); it is polled again next round"
    state.messages.append(msg)
    say(msg)


async def _ingest(
    state: BatchState, endpoint: JudgeEndpoint, client: BatchAPI, remote: RemoteBatch, batch: str, cfg: JudgeConfig
) -> None:
    """Answers into the cache, then every line's outcome into the ledger (idempotent after a crash)."""
    assert endpoint.cache is not None
    ledger = state.ledger
    answers: list[tuple[str, dict[str, Any]]] = []
    outcomes: list[tuple[str, str, str | None, int, int, float]] = []

    async def flush() -> None:
        if answers:
            await endpoint.cache.put_many(list(answers))  # type: ignore[union-attr]
        if outcomes:
            await ledger.call(ledger.mark, batch, list(outcomes))
        answers.clear()
        outcomes.clear()

    async def take(line: Any) -> None:
        if line.outcome == "done" and line.body is not None:
            try:
                reply = endpoint.provider.parse_response(line.body)
            except JudgeRequestError as exc:
                outcomes.append((line.custom_id, "invalid", str(exc), 0, 0, 0.0))
                return
            cost = cfg.cost(reply.input_tokens, reply.output_tokens) * cfg.batch.discount
            if not reply.text.strip():
                outcomes.append((line.custom_id, "retry", "an empty answer", reply.input_tokens, 0, 0.0))
                return
            answers.append((line.custom_id, {**reply.cache_value(), "batch": remote.id}))
            outcomes.append((line.custom_id, "done", None, reply.input_tokens, reply.output_tokens, cost))
        else:
            outcomes.append((line.custom_id, line.outcome, line.error, 0, 0, 0.0))
        if len(outcomes) >= INGEST_CHUNK:
            await flush()

    try:
        async for line in client.results(remote):
            await take(line)
    except (BatchNotFound, ConnectorError):
        await flush()  # what was read is kept (a download cut short, a result file gone)
        raise
    await flush()
    await ledger.call(ledger.collected, batch, cfg.batch.max_attempts)


# --- the collect pass's judges ---------------------------------------------------------------------


class _Skipped(JudgeError):
    """A real-time judge in the collect pass: not called (its evaluator is scored in the real run)."""


class _SkipEndpoint(JudgeEndpoint):
    async def complete(self, request: Any) -> Any:
        raise _Skipped("not called in the collect pass")


def begin_collect(state: BatchState, pool: JudgePool) -> tuple[JudgePool, list[BatchEndpoint]]:
    """The judges of a collect pass (a pool sharing ``pool``'s cache and budget, ``pool`` itself
    unchanged) and its batch judges: these record their cache misses in the ledger (the real-time
    fallback calls of the pass are in the ledger already: BatchEndpoint counts each one as its
    answer comes in); a real-time judge is a stand-in that is not called."""
    state.ledger.set_meta("collect", "running")
    say("batch: reading the input for requests without an answer")
    batch: list[BatchEndpoint] = []
    judges: dict[str, JudgeEndpoint] = {}
    for name, endpoint in pool.endpoints.items():
        if isinstance(endpoint, BatchEndpoint):
            endpoint.mode = "collect"
            endpoint.ledger = state.ledger
            endpoint.collected = endpoint.new_lines = 0
            batch.append(endpoint)
            judges[name] = endpoint
        else:
            judges[name] = _SkipEndpoint(name, endpoint.config)
    return pool.sharing(judges), batch


async def end_collect(state: BatchState, endpoints: list[BatchEndpoint]) -> int:
    """The collect pass read the whole input: its lines flushed into the ledger. The misses found."""
    for endpoint in endpoints:
        await endpoint.flush()
    misses = sum(e.collected for e in endpoints)
    new = sum(e.new_lines for e in endpoints)
    state.ledger.set_meta("collect", "done")
    if misses:
        say(f"batch: {misses:,} requests without an answer ({new:,} new)")
    return misses


def collect_due(state: BatchState) -> bool:
    """Whether this round reads the input: nothing open or waiting, or the last pass did not finish."""
    return not open_or_waiting(state) or state.ledger.get_meta("collect") == "running"


def all_answered(state: BatchState, misses: int) -> bool:
    """A collect pass found no miss and no batch is open: the run scores now."""
    return misses == 0 and not state.ledger.batches(states=[CREATING, OPEN])


# --- submit ----------------------------------------------------------------------------------------


async def submit(state: BatchState, state_dir: Path) -> None:
    ledger = state.ledger
    for name, cfg in state.configs.items():
        if name in state.refused:
            continue
        client = state.clients[name]
        ledger.exhaust(name, cfg.batch.max_attempts)
        max_requests, max_bytes = client.limits()
        learned = ledger.get_meta(f"quota:{name}")
        quota = min(cfg.batch.max_enqueued_tokens or math.inf, float(learned) if learned else math.inf)
        while True:
            if not ledger.waiting(name, cfg.batch.max_attempts):
                break
            room = math.inf if quota is None else quota - ledger.open_tokens(name)
            batch = ledger.new_batch_id()
            folder = state_dir / "batches" / "inputs"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{batch}.jsonl"
            ids: list[str] = []
            tokens = size = 0
            more = False
            with path.open("wb") as out:
                for cid, body, est in ledger.next_lines(name, cfg.batch.max_attempts, max_requests):
                    line = orjson.dumps(client.line(cid, orjson.loads(body))) + b"\n"
                    if ids and (size + len(line) > max_bytes or tokens + est > room):
                        more = True
                        break
                    if not ids and tokens + est > room and ledger.batches(states=[CREATING, OPEN], judge=name):
                        break  # not even one line fits beside the open batches: wait for them
                    out.write(line)
                    ids.append(cid)
                    tokens += est
                    size += len(line)
            if not ids:
                path.unlink(missing_ok=True)
                break
            ledger.begin_batch(batch, name, ids, tokens, str(path))
            try:
                remote = await client.create(batch, path, len(ids))
            except JudgeAuthError:
                ledger.unsend(batch, "the key was refused")  # 401/403: nothing was created
                raise
            except BatchRefused as exc:
                ledger.unsend(batch, str(exc))
                _refusal(ledger, name, tokens + ledger.open_tokens(name))
                path.unlink(missing_ok=True)
                say(f"batch for {name} refused ({exc}); its lines wait for a later submission")
                break
            except ConnectorError as exc:  # a 5xx or a dropped connection: created or not, unknown
                msg = f"batch for {name}: no clear answer to its create ({exc}); it is looked for at the provider next"
                state.messages.append(msg)
                say(msg)
                break
            except JudgeError as exc:  # a 4xx on create: the provider's message, not retried blindly
                ledger.invalidate(batch, str(exc))
                state.messages.append(str(exc))
                say(str(exc))
                break
            ledger.created(batch, remote.id, remote.state)
            say(f"submitted batch {remote.id} ({name}): {len(ids):,} requests")
            if more and tokens + 1 > room:
                break


def _refusal(ledger: Ledger, name: str, enqueued: int) -> None:
    """The provider refused a batch for its enqueued-token quota (OpenAI ``token_limit_exceeded``,
    Anthropic 429) with ``enqueued`` estimated tokens in its queue, that batch included: the quota
    is below that. Later batches are packed under half of it (smaller batches, fewer at once; a
    multiplicative decrease, as the quota is unknown), and every batch the provider takes raises
    the learned quota by QUOTA_GROWTH again."""
    learned = ledger.get_meta(f"quota:{name}")
    quota = min(float(learned) if learned else math.inf, max(1, enqueued // 2))
    ledger.set_meta(f"quota:{name}", str(int(quota)))


# --- reporting -------------------------------------------------------------------------------------


def say(message: str) -> None:
    print(f"assay: {message}", file=sys.stderr, flush=True)


def progress(state: BatchState) -> None:
    """One line: open batches per provider state, lines finished (the providers' own counts of the
    open batches included), and an ETA from the rate they finished at since the first line."""
    counts = state.ledger.counts()
    batches = state.ledger.batches(states=[OPEN, CREATING])
    by_state: dict[str, int] = {}
    finished_open = 0
    for b in batches:
        key = b["provider_state"] or b["state"]
        by_state[key] = by_state.get(key, 0) + 1
        finished_open += finished_lines(orjson.loads(b["counts"]) if b["counts"] else {})
    done = counts.get("done", 0) + counts.get("invalid", 0) + counts.get("exhausted", 0) + finished_open
    total = sum(counts.values())
    now = time.monotonic()
    if state.first_done is None:
        state.first_done, state.started = done, now
    gained = done - state.first_done
    eta = ""
    if gained > 0 and total > done:
        eta = f", ETA {(total - done) * (now - state.started) / gained:.0f} s"
    states = ", ".join(f"{k} {v}" for k, v in sorted(by_state.items())) or "none open"
    say(f"batches: {states}; lines done {done:,}/{total:,}{eta}")


def finished_lines(counts: dict[str, int]) -> int:
    """Lines of an open batch the provider has finished, from its ``request_counts``."""
    if "processing" in counts:  # Anthropic
        return sum(v for k, v in counts.items() if k != "processing")
    return int(counts.get("completed", 0)) + int(counts.get("failed", 0))


def batch_rows(path: Path) -> list[dict[str, Any]]:
    ledger = Ledger(path)
    try:
        return [
            {
                "judge": b["judge"],
                "id": b["provider_id"],
                "ledger_id": b["id"],
                "state": b["state"],
                "provider_state": b["provider_state"],
                "lines": b["lines"],
            }
            for b in ledger.batches(states=[CREATING, OPEN])
        ]
    finally:
        ledger.close()


def add_batch_totals(summary: dict[str, Any], config: RunConfig) -> None:
    """``totals`` over every invocation: batch lines at the discount plus real-time calls (those of
    this output's scoring runs and the fallback calls of collect passes), with the split under
    ``totals.batch`` and ``totals.realtime``."""
    path = next(
        (c.batch.ledger for c in batch_judges(config).values() if c.batch.ledger),
        None,
    )
    if path is None or not Path(path).exists():
        return
    ledger = Ledger(path)
    try:
        batch = ledger.batch_usage()
        fallback = ledger.realtime_usage()
    finally:
        ledger.close()
    totals = summary.setdefault("totals", {})
    fields = ("input_tokens", "output_tokens", "cost_usd")
    realtime = {k: totals.get(k, 0) for k in fields}
    for usage in fallback.values():
        for k in fields:
            realtime[k] += usage[k]
    batched = {k: sum(u[k] for u in batch.values()) for k in fields}
    for k in fields:
        totals[k] = realtime[k] + batched[k]
    totals["cost_usd"] = round(totals["cost_usd"], 8)
    realtime["cost_usd"] = round(realtime["cost_usd"], 8)
    batched["cost_usd"] = round(batched["cost_usd"], 8)
    totals["realtime"] = realtime
    totals["batch"] = {**batched, "lines": sum(u["lines"] for u in batch.values())}
    judges = summary.setdefault("judges", {})
    for name, usage in batch.items():
        judges.setdefault(name, {})["batch"] = {**usage, "cost_usd": round(usage["cost_usd"], 8)}


__all__ = [
    "BatchState",
    "add_batch_totals",
    "all_answered",
    "batch_judges",
    "batch_rows",
    "begin_collect",
    "collect_due",
    "drain_legacy",
    "end_collect",
    "finished_lines",
    "has_batch_judges",
    "legacy_state",
    "lost_message",
    "open_clients",
    "open_or_waiting",
    "poll",
    "progress",
    "recover",
    "refetch",
    "say",
    "submit",
    "wait_interval",
    "with_ledger",
]
