"""The run's judge endpoints: one :class:`JudgePool` owns them all, with the shared cache and budget.

Evaluators never hold an endpoint themselves; they name one (``judge: gpt``) and
:func:`resolve_judge` finds it in the pool it is handed: the engine hands the run's pool to every
evaluator it builds (``BaseEvaluator.use_judges``); nothing is ambient. Library users may pass a
config dict instead (an ad-hoc endpoint, built once per distinct config by the pool that is asked:
:meth:`JudgePool.adhoc`) or any object that implements :class:`~assay.judges.base.Judge`.

>>> import anyio, tempfile, pathlib
>>> from assay.judges.base import JudgeRequest
>>> from assay.testing.judge_server import JudgeServer
>>> async def demo():
...     async with JudgeServer() as server:
...         judges = {"local": {"base_url": server.url + "/v1", "model": "m", "rpm": 600}}
...         state = pathlib.Path(tempfile.mkdtemp())
...         async with JudgePool.from_config(judges, state_dir=state) as pool:
...             request = JudgeRequest([{"role": "user", "content": "hi"}])
...             reply = await resolve_judge("local", pool).complete(request)
...             return reply.cached, pool.stats()["local"]["ok"]
>>> anyio.run(demo)
(False, 1)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from assay.exceptions import ConfigError
from assay.judges.base import Judge, JudgeUsage
from assay.judges.budget import Budget
from assay.judges.budget_store import DEFAULT_FILENAME as BUDGET_FILENAME
from assay.judges.budget_store import open_budget_store
from assay.judges.cache import DEFAULT_FILENAME, JudgeCache
from assay.judges.config import JudgeConfig, parse_judge_config
from assay.judges.endpoint import JudgeEndpoint
from assay.judges.guard import Secrets
from assay.resources import AsyncResource


class JudgePool(AsyncResource):
    """Every judge endpoint of a run, plus the answer cache and the budget they share.

    ``async with`` opens the cache and the endpoints and closes them at the end; without it the
    pool still works (sessions then live per call and the cache opens on first use).
    """

    def __init__(
        self,
        endpoints: Mapping[str, JudgeEndpoint],
        *,
        cache: JudgeCache | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.cache = cache
        self.budget = budget if budget is not None else Budget()
        self.secrets = Secrets()
        """Every endpoint's key: each endpoint redacts all of them, not only its own."""
        self._adhoc: dict[bytes, JudgeEndpoint] = {}
        self._adhoc_lock = threading.Lock()
        for endpoint in self.endpoints.values():
            endpoint.cache = cache
            endpoint.budget = self.budget
            self.secrets.update(endpoint.secrets)
            endpoint.secrets = self.secrets

    @classmethod
    def from_config(
        cls,
        judges: Mapping[str, dict[str, Any] | JudgeConfig],
        *,
        state_dir: Path | str = ".assay",
        use_cache: bool = True,
        cache_ttl_s: float | None = None,
        budget_usd: float | None = None,
        budget_scope: str | None = None,
        budget_store: str | None = None,
    ) -> JudgePool:
        """Build the pool of a run file's ``judges:`` section (validated; ConfigError names the judge).
        ``budget_scope``: the budget is shared with the other processes of that scope (the run's
        ``--workers``, a Ray job's actors) through ``<state_dir>/budget.sqlite``, or through the
        Redis of ``budget_store`` (the run's ``rate_store``)."""
        configs = {name: parse_judge_config(name, raw) for name, raw in judges.items()}
        cache = JudgeCache(Path(state_dir) / DEFAULT_FILENAME, ttl_s=cache_ttl_s) if use_cache else None
        endpoints = {name: make_judge(name, cfg) for name, cfg in configs.items()}
        store = None
        if budget_scope is not None and budget_usd is not None:
            store = open_budget_store(budget_store or Path(state_dir) / BUDGET_FILENAME, budget_scope)
        return cls(endpoints, cache=cache, budget=Budget(budget_usd, store=store))

    def __repr__(self) -> str:
        return f"JudgePool({sorted(self.endpoints)}, cache={self.cache!r}, budget={self.budget!r})"

    def sharing(self, endpoints: Mapping[str, JudgeEndpoint]) -> JudgePool:
        """A pool of ``endpoints`` (some of this pool's, some others) with this pool's cache,
        budget and secrets; this pool still opens and closes its own endpoints (a batch run's
        collect pass: the batch judges, and a stand-in for each real-time judge)."""
        view = JudgePool({}, cache=self.cache, budget=self.budget)
        view.secrets = self.secrets
        for endpoint in endpoints.values():
            endpoint.cache, endpoint.budget = self.cache, self.budget
            self.secrets.update(endpoint.secrets)
            endpoint.secrets = self.secrets
        view.endpoints = dict(endpoints)
        return view

    async def open(self) -> None:
        if self.budget.store is not None:
            await self.budget.store.open()
        if self.cache is not None:
            await self.cache.open()
        for endpoint in self.endpoints.values():
            await endpoint.open()

    async def aclose(self) -> None:
        try:
            for endpoint in self.endpoints.values():
                await endpoint.aclose()
        finally:
            try:
                if self.cache is not None:
                    await self.cache.aclose()
            finally:
                if self.budget.store is not None:
                    await self.budget.store.aclose()

    @property
    def names(self) -> list[str]:
        return sorted(self.endpoints)

    def get(self, name: str) -> JudgeEndpoint:
        """The endpoint named ``name``; ConfigError naming it (and the known ones) otherwise."""
        try:
            return self.endpoints[name]
        except KeyError:
            known = ", ".join(self.names) or "none are configured"
            raise ConfigError(f"unknown judge {name!r} (judges: {known})") from None

    def adhoc(self, spec: dict[str, Any] | JudgeConfig) -> JudgeEndpoint:
        """The endpoint of an inline judge config (no cache, no budget): built once per distinct
        config and kept by this pool, so the evaluators sharing the pool, and repeated
        ``evaluate()`` calls of one evaluator, share its limits and statistics."""
        config = parse_judge_config("(inline)", spec)
        key = orjson.dumps(config.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        with self._adhoc_lock:
            endpoint = self._adhoc.get(key)
            if endpoint is None:
                endpoint = self._adhoc[key] = JudgeEndpoint(f"{config.provider}:{config.model}", config)
        return endpoint

    @property
    def spent_usd(self) -> float:
        return self.budget.spent_usd

    def usage(self) -> JudgeUsage:
        """Tokens, cost and calls of every endpoint together."""
        total = JudgeUsage()
        for endpoint in self.endpoints.values():
            total.add(endpoint.stats.usage)
        return total

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per judge: requests, ok, errors, 429s, 5xx, timeouts, retries, cached hits, tokens,
        cost, p50/p99 latency and the current adaptive rate."""
        return {name: endpoint.snapshot() for name, endpoint in sorted(self.endpoints.items())}


def make_judge(name: str, config: JudgeConfig) -> JudgeEndpoint:
    """The pool member for one ``judges:`` entry: an HTTP endpoint speaking its provider's wire
    format (the provider class is looked up by ``config.provider``)."""
    if config.mode == "batch":
        from assay.judges.batch.endpoint import BatchEndpoint

        return BatchEndpoint(name, config)
    return JudgeEndpoint(name, config)


def resolve_judge(spec: str | dict[str, Any] | JudgeConfig | Judge, pool: JudgePool | None = None) -> Judge:
    """The judge an evaluator's ``judge`` parameter refers to, found in ``pool``.

    * a name: the pool's endpoint of that name (ConfigError when the pool declares none, or not
      this one);
    * a config dict / JudgeConfig: the pool's ad-hoc endpoint for it (:meth:`JudgePool.adhoc`;
      without a pool, a new endpoint each call);
    * a Judge object: returned as is.
    """
    if isinstance(spec, str):
        if pool is None or not pool.endpoints:
            raise ConfigError(
                f"judge {spec!r} is referred to by name, but no judges are declared "
                "(declare it under `judges:` in the run file, or pass a config dict as `judge`)"
            )
        return pool.get(spec)
    if isinstance(spec, JudgeConfig | dict):
        return (pool if pool is not None else JudgePool({})).adhoc(spec)
    if isinstance(spec, Judge):
        return spec
    raise ConfigError(f"judge: expected a judge name, a config mapping or a Judge, got {type(spec).__name__}")
