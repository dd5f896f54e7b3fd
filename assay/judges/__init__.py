"""LLM judge endpoints: wire formats, limits, retries, the answer cache, cost and the budget.

Evaluators build a :class:`JudgeRequest` and await ``judge.complete(request)`` on the judge that
:func:`resolve_judge` finds (a name in the run's :class:`JudgePool` the engine hands each evaluator,
a config dict, or a Judge).
Each provider's wire format, auth and retry policy is a :class:`JudgeProvider` subclass, found by
name (:func:`provider_names`; add one with :func:`register_provider` or an
``assay.judge_providers`` entry point). See docs/judges.md for the configuration reference.
"""

from assay.judges.base import Judge, JudgeRequest, JudgeResponse, JudgeUsage
from assay.judges.budget import Budget
from assay.judges.budget_store import BudgetStore
from assay.judges.cache import JudgeCache, cache_key
from assay.judges.config import JudgeConfig, parse_judge_config
from assay.judges.endpoint import EndpointStats, JudgeEndpoint
from assay.judges.pool import JudgePool, resolve_judge
from assay.judges.providers import provider_names, register_provider
from assay.judges.providers.base import JudgeProvider

__all__ = [
    "Budget",
    "BudgetStore",
    "EndpointStats",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeEndpoint",
    "JudgePool",
    "JudgeProvider",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeUsage",
    "cache_key",
    "parse_judge_config",
    "provider_names",
    "register_provider",
    "resolve_judge",
]
