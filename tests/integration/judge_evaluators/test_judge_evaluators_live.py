"""Judge evaluators against the real stand-in judge server over HTTP (all three wire formats),
through a real JudgePool: structured verdicts, salvage from text, errors with raw output, retries
exhausted, attachments on the wire, and the cache on a second run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.evaluators.base import BaseEvaluator
from assay.judges import JudgePool
from assay.records import Result
from assay.registry import build_evaluator
from assay.testing.judge_server import JudgeServer
from assay.traces.model import Trace
from assay.traces.normalize import trace_from_args

BASE_PATH = {"openai": "/v1", "anthropic": "/v1", "ollama": ""}


def prompt_text(body: dict[str, Any]) -> str:
    """Every text of a provider request body (system included)."""
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return "\n".join(parts)


def grade(body: dict[str, Any]) -> dict[str, Any] | str:
    text = prompt_text(body)
    if "Question: " in text:  # rubric_dag node
        question = text.split("Question: ", 1)[1]
        return {"reasoning": "checked", "choice": "yes" if question.startswith("Does the response") else "no"}
    if "atomic claims" in text:
        return {
            "claims": [{"claim": "built 1889", "supported": True}, {"claim": "500 m tall", "supported": False}],
            "reasoning": "height unsupported",
        }
    if "SALVAGE-ME" in text:
        return "Let me think.\nThe answer is right. Thus, the score should be: true"
    if "GARBAGE" in text:
        return "I would rather not say."
    if "<response>" in text:  # correctness and friends: Paris is right
        answer = text.split("<response>", 1)[1].split("</response>", 1)[0]
        return {"reasoning": "compared with the reference", "score": "Paris" in answer}
    return {"reasoning": "default", "score": 0.5}


async def score_all(pool: JudgePool, ev: BaseEvaluator[Any], traces: list[Trace]) -> list[list[Result]]:
    ev.use_judges(pool)
    async with pool:
        return [await ev.ascore_trace(t) for t in traces]


def make_pool(server: JudgeServer, provider: str, tmp_path: Path, **extra: Any) -> JudgePool:
    cfg = {"provider": provider, "model": "stand-in", "base_url": server.url + BASE_PATH[provider], **extra}
    return JudgePool.from_config({"grader": cfg}, state_dir=tmp_path)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_llm_judge_structured_verdicts_on_every_wire(provider: str, tmp_path: Path) -> None:
    ev = build_evaluator("llm_judge", {"prompt": "correctness", "judge": "grader"})
    traces = [
        trace_from_args("Paris", "Paris", "capital of France?"),
        trace_from_args("Lyon", "Paris", "capital of France?"),
    ]

    async def main() -> list[list[Result]]:
        async with JudgeServer(rule=grade) as server:
            return await score_all(make_pool(server, provider, tmp_path), ev, traces)

    (good,), (bad,) = anyio.run(main)
    assert (good.score, good.value, good.comment, good.error) == (1.0, True, "compared with the reference", None)
    assert (bad.score, bad.value) == (0.0, False)
    assert good.metadata["usage"]["calls"] == 1 and "salvaged" not in good.metadata


def test_salvage_and_unparseable_over_http(tmp_path: Path) -> None:
    ev = build_evaluator("llm_judge", {"prompt": "Grade this: {outputs}", "judge": "grader"})
    traces = [trace_from_args("SALVAGE-ME"), trace_from_args("GARBAGE")]

    async def main() -> list[list[Result]]:
        async with JudgeServer(rule=grade) as server:
            return await score_all(make_pool(server, "openai", tmp_path), ev, traces)

    (salvaged,), (garbage,) = anyio.run(main)
    assert (salvaged.score, salvaged.value, salvaged.metadata["salvaged"]) == (1.0, True, True)
    assert garbage.score is None and garbage.error is not None and "VerdictParseError" in garbage.error
    assert garbage.metadata["raw_output"] == "I would rather not say."


def test_server_errors_after_retries_are_error_results(tmp_path: Path) -> None:
    ev = build_evaluator("llm_judge", {"prompt": "conciseness", "judge": "grader"})

    async def main() -> tuple[list[list[Result]], int]:
        async with JudgeServer(rule=grade, error_rate=1.0) as server:
            pool = make_pool(server, "openai", tmp_path, max_retries=1)
            out = await score_all(pool, ev, [trace_from_args("a", None, "q")])
            return out, server.stats.server_errors

    ((r,),), errors = anyio.run(main)
    assert r.score is None and r.error is not None and "500" in r.error
    assert errors == 2  # the first try and one retry


def test_rubric_dag_and_groundedness_over_http(tmp_path: Path) -> None:
    dag = build_evaluator("rubric_dag", {"preset": "answer_quality", "judge": "grader"})
    ground = build_evaluator("groundedness", {"judge": "grader"})
    trace = trace_from_args("Built in 1889; 500 m tall.", None, "When was it built?", context=["Completed in 1889."])

    async def main() -> tuple[list[list[Result]], list[list[Result]]]:
        async with JudgeServer(rule=grade) as server:
            pool = make_pool(server, "anthropic", tmp_path)
            return await score_all(pool, dag, [trace]), await score_all(pool, ground, [trace])

    ((d,),), ((g,),) = anyio.run(main)
    assert d.score == 0.7 and [p["choice"] for p in d.metadata["path"]] == ["yes", "no"]
    assert (g.score, g.value) == (0.5, "1/2 claims supported")


def test_attachments_reach_the_wire(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def rule(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"reasoning": "a cat photo", "score": False}

    ev = build_evaluator("llm_judge", {"prompt": "explicit_content", "judge": "grader"})
    trace = trace_from_args("a cat", None, "describe", scenario={"attachments": ["https://example.com/cat.png"]})

    async def main() -> list[list[Result]]:
        async with JudgeServer(rule=rule) as server:
            return await score_all(make_pool(server, "openai", tmp_path), ev, [trace])

    ((r,),) = anyio.run(main)
    assert (r.score, r.value) == (1.0, False)
    blocks = seen[0]["messages"][-1]["content"]
    assert {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}} in blocks


def test_second_run_is_served_from_the_cache(tmp_path: Path) -> None:
    ev = build_evaluator("trajectory_judge", {"judge": "grader", "continuous": True})
    traces = [
        trace_from_args([{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "ok"}])
        for i in range(3)
    ]

    async def main() -> tuple[list[list[Result]], list[list[Result]], int]:
        async with JudgeServer(rule=grade) as server:
            first = await score_all(make_pool(server, "openai", tmp_path), ev, traces)
            second = await score_all(make_pool(server, "openai", tmp_path), ev, traces)
            return first, second, server.stats.requests

    first, second, requests = anyio.run(main)
    assert requests == 3
    assert [r.score for (r,) in first] == [r.score for (r,) in second] == [0.5, 0.5, 0.5]
    assert all(r.metadata["usage"]["cached"] for (r,) in second)
    assert not any(r.metadata["usage"]["cached"] for (r,) in first)
