"""embedding_similarity with a hosted model: OpenAI-compatible embeddings through assay's judge
endpoint (the stand-in server's /v1/embeddings over HTTP): batched per micro-batch, cached,
counted, and stopping the run on a wrong key as judges do."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from assay.evaluators.embedding import EmbeddingSimilarity, similarity
from assay.testing.judge_server import JudgeServerThread, stand_in_embedding


@pytest.fixture
def server() -> Iterator[JudgeServerThread]:
    with JudgeServerThread(api_key="sk-emb") as srv:
        yield srv


def test_the_openai_model_shorthand_embeds_through_the_api(
    server: JudgeServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-emb")
    ev = EmbeddingSimilarity(model="openai:text-embedding-3-small")
    r = ev.evaluate(outputs="the order has shipped", reference_outputs="your order shipped today")
    expected = similarity(
        stand_in_embedding("the order has shipped"), stand_in_embedding("your order shipped today"), "cosine"
    )
    assert r.score == pytest.approx(expected, abs=1e-5) and 0.0 < r.score < 1.0
    assert server.stats.by_path["/v1/embeddings"] == 1  # both texts in one request


def test_compat_default_is_openai_embeddings_rounded_like_openevals(
    server: JudgeServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.compat.openevals.string.embedding_similarity import create_embedding_similarity_evaluator

    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-emb")
    result = create_embedding_similarity_evaluator()(outputs="blue sky today", reference_outputs="the sky is blue")
    assert result["key"] == "embedding_similarity"
    assert result["score"] == round(result["score"], 2) and 0.0 < result["score"] < 1.0
    assert server.stats.by_path["/v1/embeddings"] == 1


def test_a_declared_endpoint_batches_and_caches_in_a_run(server: JudgeServerThread, tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    with traces.open("w") as f:
        for i in range(30):
            record = {"id": f"t{i}", "outputs": f"answer number {i % 5}", "reference_outputs": "answer number 1"}
            f.write(json.dumps(record) + "\n")
    run = tmp_path / "run.yaml"
    run.write_text(
        f"source: {{path: {traces}}}\n"
        f"sink: {{path: {tmp_path / 'out'}/}}\n"
        f"state_dir: {tmp_path / 'state'}\n"
        "judges:\n"
        f"  emb: {{provider: openai, model: text-embedding-3-small, base_url: '{server.url}/v1',"
        " api_key_env: EMB_KEY}\n"
        "evaluators:\n"
        "  - name: embedding_similarity\n"
        "    params: {judge: emb}\n"
    )

    def assay(*args: str, key: str = "sk-emb") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from assay.cli import main; main()", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**__import__("os").environ, "EMB_KEY": key},
            check=False,
        )

    proc = assay("run", str(run))
    assert proc.returncode == 0, proc.stderr
    first = server.stats.by_path["/v1/embeddings"]
    assert first == 1  # 30 traces in one micro-batch (batch_size 256), 6 distinct texts: one request
    rows = [json.loads(x) for p in (tmp_path / "out").glob("part-*") for x in p.read_text().splitlines()]
    scores = {r["trace_id"]: r["results"]["embedding_similarity"]["score"] for r in rows}
    assert len(scores) == 30 and scores["t1"] == pytest.approx(1.0) and scores["t0"] < 1.0
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["judges"]["emb"]["requests"] == first

    proc = assay("run", str(run), "--fresh")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.by_path["/v1/embeddings"] == first  # every text from the cache: nothing paid twice

    proc = assay("run", str(run), "--fresh", "--no-cache", key="wrong")
    assert proc.returncode == 2, proc.stderr
    assert "EMB_KEY" in proc.stderr


def test_a_provider_without_embeddings_says_so() -> None:
    from assay.exceptions import ConfigError

    ev = EmbeddingSimilarity(judge={"provider": "anthropic", "model": "claude-x"})
    with pytest.raises(ConfigError, match="no embeddings API"):
        anyio.run(ev.aembed, ["x"])
