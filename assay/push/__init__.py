"""Push targets: scores back where teams look (LangSmith feedback, Langfuse scores, Phoenix span
annotations, OpenTelemetry ``gen_ai.evaluation.result`` events), from a *published* output only.

A run file names them::

    push:
      - {type: langsmith}                                   # LANGSMITH_API_KEY
      - {type: langfuse, host: "https://cloud.langfuse.com"}  # LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY
      - {type: phoenix, endpoint: "http://127.0.0.1:6006"}  # PHOENIX_API_KEY when the server wants one
      - {type: otel, endpoint: "http://127.0.0.1:4318"}     # OTLP/HTTP /v1/logs

Every pushed item's id is uuid5 of (trace id, result key, the result's ``identity``)
(:func:`push_id`), its timestamp the run's day, so pushing twice (or from two retries at once)
leaves each score once; a ledger in the state dir (:class:`PushLedger`) makes a second push send
nothing and a killed push resume. A new target is one module (a :class:`PushTarget` subclass)
plus one line in :data:`~assay.push.registry.BUILTIN_TARGETS` or an ``assay.push`` entry point.
"""

from assay.push.base import ASSAY_NAMESPACE, ItemOutcome, PushItem, PushParams, PushTarget, Request, push_id
from assay.push.engine import TargetReport, push_target
from assay.push.ledger import PushLedger
from assay.push.registry import build_target, target_types, validate_push_spec

__all__ = [
    "ASSAY_NAMESPACE",
    "ItemOutcome",
    "PushItem",
    "PushLedger",
    "PushParams",
    "PushTarget",
    "Request",
    "TargetReport",
    "build_target",
    "push_id",
    "push_target",
    "target_types",
    "validate_push_spec",
]
