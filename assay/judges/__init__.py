"""LLM judge endpoints: wire formats, limits, retries, the answer cache, cost and the budget.

Evaluators build a :class:`JudgeRequest` and await ``judge.complete(request)`` on the judge that
:func:`resolve_judge` finds (a name in the current :class:`JudgePool`, a config dict, or a Judge).
See docs/judges.md for the configuration reference.
"""

from assay.judges.base import Judge, JudgeRequest, JudgeResponse, JudgeUsage
from assay.judges.budget import Budget
from assay.judges.cache import JudgeCache, cache_key
from assay.judges.config import JudgeConfig, parse_judge_config
from assay.judges.endpoint import EndpointStats, JudgeEndpoint
from assay.judges.pool import JudgePool, current_pool, resolve_judge, use_pool

__all__ = [
    "Budget",
    "EndpointStats",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeEndpoint",
    "JudgePool",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeUsage",
    "cache_key",
    "current_pool",
    "parse_judge_config",
    "resolve_judge",
    "use_pool",
]
