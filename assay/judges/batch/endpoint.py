"""The judge of a ``mode: batch`` entry: a :class:`~assay.judges.endpoint.JudgeEndpoint` whose
cache misses go to the provider's batch API instead of being sent.

Two modes:

* ``collect`` (the first pass of an invocation, nothing written): a miss is recorded in the
  ledger as a line to submit (its ``custom_id`` is the cache key) and the call raises
  :class:`BatchPending`, so the evaluator stops there;
* ``score`` (the normal run, once every line is answered): every call should be a cache hit.

In both, a line the ledger knows as finished without an answer is resolved the same way: a line
the provider rejected (4xx) is an error result with the provider's message; a line that used up
``max_attempts`` gets ``fallback`` (one real-time call at full price, cached as usual, or an
error result).

A fallback call of the collect pass is written to the ledger's real-time totals as soon as its
answer is in, before the answer goes into the cache: an invocation killed a moment later has
paid for it, and its next invocation replays the cached answer without a call, so the summary
totals over every invocation (``totals.realtime``) would otherwise never see it. (A call answered
after the count and killed before the cache is made and counted again: it was paid twice.)
"""

from __future__ import annotations

from typing import Any

import anyio

from assay.exceptions import JudgeError, JudgeRequestError
from assay.judges.base import JudgeRequest, JudgeResponse
from assay.judges.batch.ledger import DONE, EXHAUSTED, INVALID, Ledger
from assay.judges.endpoint import JudgeEndpoint
from assay.judges.wire import WireReply, estimate_input_tokens

#: Collect-pass misses are written to the ledger in chunks of this many (bounded memory).
FLUSH_EVERY = 512


class BatchPending(JudgeError):
    """The request was queued for a batch: no answer in this invocation (collect pass only)."""


class BatchEndpoint(JudgeEndpoint):
    """A judge answered through the provider's batch API (``mode: batch``)."""

    mode: str = "score"
    ledger: Ledger | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._buffer: dict[str, tuple[bytes, int]] = {}
        self.collected = 0
        """Misses recorded by the collect pass (new lines or lines already in the ledger)."""
        self.new_lines = 0
        self._counted: dict[str, int] = {}
        """Cache key → fallback answers of it counted in the ledger's real-time totals whose call
        has not returned yet (two traces may ask the very same question)."""
        self._fallbacks: dict[str, anyio.Event] = {}
        """Cache key → the fallback call under way for it: the same request of another trace
        waits for its answer (in the cache then) instead of paying for a second call."""
        self._usage: list[tuple[int, int, float]] = []
        """Fallback answers waiting for the next ledger commit (group commit: one transaction for
        every answer that came in while the previous one was written)."""
        self._usage_taken = self._usage_done = 0
        """Commits of real-time usage that took their calls / that are written."""
        self._usage_lock: anyio.Lock | None = None
        self.refetch: set[str] = set()
        """Ledger ids of finished batches holding answers that left the cache (collect pass): their
        results are downloaded again."""
        self.no_refetch: set[str] = set()
        """Batches whose results were downloaded again in this invocation, or cannot be: an answer
        of theirs still missing is a line to submit again."""

    def _ledger(self) -> Ledger:
        if self.ledger is None:
            path = self.config.batch.ledger
            if path is None:
                raise JudgeError(f"judge {self.name!r}: mode: batch is answered only inside `assay run`")
            self.ledger = Ledger(path)
        return self.ledger

    async def aclose(self) -> None:
        await super().aclose()
        if self.ledger is not None and self.mode == "score":
            self.ledger.close()
            self.ledger = None

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        if self.cache is None:
            raise JudgeError(f"judge {self.name!r}: mode: batch needs the judge cache (it is the join)")
        self._read_key()
        cfg = self.config
        body, key = self.request_body(request)
        hit = await self._cache_get(key)
        if hit is not None:
            return await self._replay_priced(hit, key)
        ledger = self._ledger()
        line = await ledger.call(ledger.line, key)
        state = line["state"] if line is not None else None
        if state == INVALID:
            raise JudgeRequestError(f"judge {self.name!r}: the batch API rejected this request: {line['error']}")  # type: ignore[index]
        if state == EXHAUSTED:
            if cfg.batch.fallback == "realtime":
                return await self._fallback(request, key)
            raise JudgeError(
                f"judge {self.name!r}: no batch answer after {line['attempts']} attempts: {line['error']}"  # type: ignore[index]
            )
        if self.mode == "collect":
            self.collected += 1
            batch = line["batch"] if line is not None else None
            if state == DONE and batch is not None and batch not in self.no_refetch:
                # answered, and its answer left the cache (deleted, expired, a damaged cache moved
                # aside): the batch's results are downloaded again before anything is paid again
                self.refetch.add(batch)
                raise BatchPending(f"judge {self.name!r}: its answer is downloaded again")
            if (line is None or state == DONE) and key not in self._buffer:  # DONE: its answer is gone
                import orjson

                tokens = estimate_input_tokens(request) + self._expected_output_tokens(request)
                self._buffer[key] = (orjson.dumps(body), tokens)
                if len(self._buffer) >= FLUSH_EVERY:
                    await self.flush()
            raise BatchPending(f"judge {self.name!r}: queued for a batch")
        raise JudgeError(
            f"judge {self.name!r}: no batch answer for this request yet (ledger: {state or 'not submitted'});"
            " run the same command again"
        )

    async def _replay_priced(self, hit: dict[str, Any], key: str) -> JudgeResponse:
        """A cached answer carrying what it cost (its row's ``cost_usd``): a batch answer at the
        batch price, a real-time fallback of a line that used up its attempts at full price. The
        judge totals are not touched (the ledger counts every line once, whatever rows replay it)."""
        response = self.replay(hit)
        if self.mode == "collect":  # no row is written from this pass
            return response
        try:
            tin, tout = int(hit.get("input_tokens") or 0), int(hit.get("output_tokens") or 0)
        except (TypeError, ValueError):
            return response
        cfg = self.config
        if hit.get("batch"):
            cost = cfg.cost(tin, tout) * cfg.batch.discount
        else:  # answered in real time: a fallback of this run's ledger, or an answer paid elsewhere
            ledger = self._ledger()
            line = await ledger.call(ledger.line, key)
            if line is None or line["state"] != EXHAUSTED:
                return response
            cost = cfg.cost(tin, tout)
        u = response.usage
        u.input_tokens, u.output_tokens, u.cost_usd = tin, tout, cost
        return response

    async def _fallback(self, request: JudgeRequest, key: str) -> JudgeResponse:
        """One real-time call at full price for a line that used up its attempts (cached like any
        answer), one at a time per request."""
        under_way = self._fallbacks.get(key)
        if under_way is not None:
            await under_way.wait()
            hit = await self._cache_get(key)
            if hit is not None:
                return self.replay(hit)
        done = self._fallbacks[key] = anyio.Event()
        try:
            response = await super().complete(request)
        finally:
            done.set()
            if self._fallbacks.get(key) is done:
                del self._fallbacks[key]
        if self.mode == "collect" and not response.cached:
            if self._counted.get(key, 0) > 0:  # counted when it was cached
                self._counted[key] -= 1
                if not self._counted[key]:
                    del self._counted[key]
            else:  # an answer without a verdict: not cached, counted here
                u = response.usage
                await self._count_realtime(u.input_tokens, u.output_tokens, u.cost_usd)
        return response

    async def _cache_put(self, key: str, reply: WireReply) -> None:
        if self.mode == "collect":  # a fallback answer: counted before it is cached (see the module doc)
            cost = self.config.cost(reply.input_tokens, reply.output_tokens)
            await self._count_realtime(reply.input_tokens, reply.output_tokens, cost)
            self._counted[key] = self._counted.get(key, 0) + 1
        await super()._cache_put(key, reply)

    async def _count_realtime(self, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
        """Add one fallback call to the ledger's real-time totals; returns once it is committed."""
        if self._usage_lock is None:
            self._usage_lock = anyio.Lock()
        self._usage.append((input_tokens, output_tokens, cost_usd))
        mine = self._usage_taken  # the number of the commit that will carry this call
        async with self._usage_lock:
            if self._usage_done > mine:
                return  # written by a commit that took it while this one waited
            pending, self._usage = self._usage, []
            self._usage_taken += 1
            ledger = self._ledger()
            await ledger.call(
                ledger.add_realtime,
                self.name,
                len(pending),
                sum(p[0] for p in pending),
                sum(p[1] for p in pending),
                sum(p[2] for p in pending),
            )
            self._usage_done += 1

    async def flush(self) -> None:
        """Write the collected misses to the ledger."""
        if not self._buffer:
            return
        items = [(k, b, t) for k, (b, t) in self._buffer.items()]
        self._buffer.clear()
        ledger = self._ledger()
        self.new_lines += await ledger.call(ledger.queue, self.name, items)
