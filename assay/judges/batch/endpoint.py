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
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import JudgeError, JudgeRequestError
from assay.judges.base import JudgeRequest, JudgeResponse
from assay.judges.batch.ledger import DONE, EXHAUSTED, INVALID, Ledger
from assay.judges.endpoint import JudgeEndpoint
from assay.judges.wire import estimate_input_tokens

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
            return self.replay(hit)
        ledger = self._ledger()
        line = await ledger.call(ledger.line, key)
        state = line["state"] if line is not None else None
        if state == INVALID:
            raise JudgeRequestError(f"judge {self.name!r}: the batch API rejected this request: {line['error']}")  # type: ignore[index]
        if state == EXHAUSTED:
            if cfg.batch.fallback == "realtime":
                return await super().complete(request)  # full price; cached like any answer
            raise JudgeError(
                f"judge {self.name!r}: no batch answer after {line['attempts']} attempts: {line['error']}"  # type: ignore[index]
            )
        if self.mode == "collect":
            self.collected += 1
            if (line is None or state == DONE) and key not in self._buffer:  # DONE: its answer left the cache
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

    async def flush(self) -> None:
        """Write the collected misses to the ledger."""
        if not self._buffer:
            return
        items = [(k, b, t) for k, (b, t) in self._buffer.items()]
        self._buffer.clear()
        ledger = self._ledger()
        self.new_lines += await ledger.call(ledger.queue, self.name, items)
