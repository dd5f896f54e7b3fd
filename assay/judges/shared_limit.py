"""One rate budget for many processes and machines: GCRA in Redis (``judges.NAME.shared_limit``).

Every process that names the same Redis and the same judge endpoint (name, base URL and model)
draws its send times from one generic cell rate algorithm (GCRA) kept in Redis. A Lua script,
run atomically with EVALSHA, keeps the *theoretical arrival time* (TAT) of the endpoint's request
stream and, when ``tpm`` is set, of its token stream, and **reserves** the next slot of each: it
answers how long this caller must wait before sending and moves the TAT on by one emission
interval (``1/rate``; tokens: ``tokens/tpm``). So N processes together send at the configured rate,
evenly spaced, whoever they are; a shard that finishes early simply stops reserving and the others
get its share at once. Times come from the Redis server's clock (``TIME``), so machines with skewed
clocks agree.

The request stream has no burst tolerance (a strict limiter refuses bursts); the token stream may
run ``TOKEN_BURST_S`` ahead, like the local token bucket. Keys expire once idle.

Install the client with ``pip install 'assay[redis]'`` (``redis>=5``, its asyncio API).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from assay.exceptions import ConfigError, JudgeUnavailableError

#: The pacing runs at this fraction of the configured rate: wider than the local pacer's, as the
#: sends of different processes cannot see each other's lateness (a send a millisecond late
#: crowds the next process's slot at a strict limiter).
SHARED_PACE_MARGIN = 0.97
#: Seconds of token capacity the shared token stream may run ahead.
TOKEN_BURST_S = 10.0
#: The Redis clock is mapped onto this process's by the quickest of the last CLOCK_SAMPLES round
#: trips (a slow one, the event loop busy when the answer came, would place the slot late).
CLOCK_SAMPLES = 16

# KEYS[1]: request TAT; KEYS[2]: token TAT.
# ARGV[1]: request interval (µs, 0: no request limit); ARGV[2]: µs per token (0: no token limit);
# ARGV[3]: tokens of this request; ARGV[4]: token burst tolerance (µs).
# Returns {the server's time, the microseconds to wait before sending (the reserved slot)}.
GCRA_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wait = 0
local interval = tonumber(ARGV[1])
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tat < now then tat = now end
  wait = tat - now
  local new_tat = tat + interval
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 60000)
end
local per_token = tonumber(ARGV[2])
if per_token > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tat < now then tat = now end
  local tolerance = tonumber(ARGV[4])
  local allowed_at = tat - tolerance
  local twait = allowed_at - now
  if twait < 0 then twait = 0 end
  if twait > wait then wait = twait end
  local new_tat = tat + per_token * tonumber(ARGV[3])
  redis.call('SET', KEYS[2], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 60000)
end
return {now, wait}
"""


def _require_redis() -> Any:
    try:
        import redis.asyncio as aioredis
    except ImportError as exc:
        raise ConfigError("judges.*.shared_limit needs the Redis client: pip install 'assay[redis]'") from exc
    return aioredis


class SharedRate:
    """The Redis-held GCRA of one judge endpoint; :meth:`reserve` returns how long to wait.

    ``rpm``/``tpm`` are the endpoint's whole budget (not a shard's share). The client is created
    lazily inside the running event loop and replaced when the loop changes.
    """

    def __init__(self, url: str, name: str, *, rpm: float | None, tpm: float | None, scope: str = "") -> None:
        _require_redis()
        self.url = url
        digest = hashlib.sha256(f"{name}\0{scope}".encode()).hexdigest()[:16]
        self.keys = [f"assay:gcra:{name}:{digest}:req", f"assay:gcra:{name}:{digest}:tok"]
        self.request_interval_us = 0 if rpm is None else round(60e6 / (rpm * SHARED_PACE_MARGIN))
        self.us_per_token = 0.0 if tpm is None else 60e6 / tpm
        self.token_tolerance_us = round(TOKEN_BURST_S * 1e6)
        self.reservations = 0
        self._clock_samples: deque[tuple[float, float]] = deque(maxlen=CLOCK_SAMPLES)
        """(round trip, Redis time - local time at its middle) of recent reservations (seconds)."""
        self._client: Any = None
        self._script: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"SharedRate(keys={self.keys[0]!r}, interval_us={self.request_interval_us})"

    @property
    def active(self) -> bool:
        return self.request_interval_us > 0 or self.us_per_token > 0

    def _bind(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._script is None or self._loop is not loop:
            aioredis = _require_redis()
            self._client = aioredis.from_url(self.url)
            self._script = self._client.register_script(GCRA_LUA)
            self._loop = loop
        return self._script

    async def reserve(self, tokens: int) -> float:
        """Reserve the next send slot (and ``tokens`` of the token budget); seconds to wait."""
        if not self.active:
            return 0.0
        _, wait_us = await self._call(tokens)
        return wait_us / 1e6

    async def reserve_at(self, tokens: int, clock: Callable[[], float] = time.monotonic) -> float:
        """Reserve the next send slot; its time on ``clock``. Every holder of the budget sends at
        its own slot's time, so the slots must be placed on each process's clock as precisely as
        Redis placed them on its own (a strict limiter refuses a send a millisecond early): the
        offset between the clocks is taken from the quickest recent round trip, not from when this
        answer happened to be read."""
        if not self.active:
            return clock()
        if not self._clock_samples:
            await self._calibrate(clock)
        before = clock()
        now_us, wait_us = await self._call(tokens)
        after = clock()
        redis_now = now_us / 1e6
        self._clock_samples.append((after - before, redis_now - (before + after) / 2))
        _, offset = min(self._clock_samples)
        return redis_now + wait_us / 1e6 - offset

    async def _calibrate(self, clock: Callable[[], float]) -> None:
        """Map the Redis clock onto ``clock`` before the first reservation (whose round trip also
        opens the connection and loads the script, so says little about the offset)."""
        self._bind()
        from redis.exceptions import RedisError

        for _ in range(CLOCK_SAMPLES // 2):
            before = clock()
            try:
                seconds, micros = await self._client.time()
            except (RedisError, OSError) as exc:
                raise JudgeUnavailableError(f"shared rate limit: Redis at {self.url} failed: {exc}") from exc
            after = clock()
            self._clock_samples.append((after - before, seconds + micros / 1e6 - (before + after) / 2))

    async def _call(self, tokens: int) -> tuple[float, float]:
        """One run of the script: (the Redis server's time, the wait), in microseconds."""
        script = self._bind()
        from redis.exceptions import RedisError

        try:
            now_us, wait_us = await script(
                keys=self.keys,
                args=[self.request_interval_us, self.us_per_token, max(tokens, 0), self.token_tolerance_us],
            )
        except (RedisError, OSError) as exc:
            raise JudgeUnavailableError(f"shared rate limit: Redis at {self.url} failed: {exc}") from exc
        self.reservations += 1
        return float(now_us), max(float(wait_us), 0.0)

    @property
    def interval(self) -> float | None:
        """Seconds between two reserved request slots (None: no request limit)."""
        return self.request_interval_us / 1e6 if self.request_interval_us else None

    async def wait_turn(self, tokens: int) -> None:
        """Reserve a slot and sleep until it comes."""
        delay = await self.reserve(tokens)
        if delay > 0:
            await anyio.sleep(delay)

    async def aclose(self) -> None:
        client, self._client, self._script = self._client, None, None
        if client is not None and self._loop is asyncio.get_running_loop():
            with anyio.CancelScope(shield=True):
                await client.aclose()
