"""assay.compat against the stand-in judge answering every verdict the same way, once "yes" and
once "no" (so no prompt wording decides a test): openevals' result dicts, a pydantic
``output_schema``, LangChain chat models called again and again (sync and async), a simulation
whose app returns the OpenAI SDK's message objects, and openevals' low-level scorer with
attachments, all over HTTP with the real client classes."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from assay.compat.openevals.llm import _create_llm_as_judge_scorer, create_async_llm_as_judge, create_llm_as_judge
from assay.compat.openevals.prompts import CONCISENESS_PROMPT, CORRECTNESS_PROMPT
from assay.compat.openevals.types import EvaluatorResult
from assay.testing.judge_server import JudgeServerThread, requested_schema

# imported by the tests that use it (a worker that runs none of them does not pay its ~1.7 s import)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("langchain_openai") is None, reason="needs langchain_openai")


def fill(schema: dict[str, Any], yes: bool) -> Any:
    """The schema filled with one verdict: booleans ``yes``, numbers at the top or bottom."""
    if schema.get("enum"):
        return max(schema["enum"]) if yes else min(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return fill(schema[key][0], yes)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: fill(v, yes) for k, v in (schema.get("properties") or {}).items()}
    if kind == "boolean":
        return yes
    if kind in ("number", "integer"):
        return 1.0 if yes else 0.0
    return "Stand-in reasoning."


class SameVerdict:
    """The stand-in's rule: the same verdict whatever the prompt; free text "yes"/"no"."""

    def __init__(self, yes: bool) -> None:
        self.yes = yes
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        schema = requested_schema(body, "anthropic") or requested_schema(body, "openai")
        if schema is None:
            return "yes" if self.yes else "no"
        return fill(schema, self.yes)


@pytest.fixture(scope="module", params=[True, False], ids=["yes", "no"])
def verdict(request: pytest.FixtureRequest) -> Iterator[tuple[JudgeServerThread, SameVerdict]]:
    rule = SameVerdict(request.param)
    with JudgeServerThread(rule=rule) as server:
        yield server, rule


@pytest.fixture
def env(verdict: tuple[JudgeServerThread, SameVerdict], monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    server, rule = verdict
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stand-in")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-stand-in")
    rule.bodies.clear()
    return server.url, rule.yes


def test_results_are_openevals_dicts(env: tuple[str, bool]) -> None:
    _, yes = env
    ev = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, feedback_key="correctness", model="openai:gpt-4o-mini")
    result = ev(inputs="2+2?", outputs="4", reference_outputs="4")
    assert result == EvaluatorResult(key="correctness", score=yes, comment="Stand-in reasoning.", metadata=None)
    no_reasoning = create_llm_as_judge(prompt=CONCISENESS_PROMPT, model="openai:gpt-4o-mini", use_reasoning=False)
    assert no_reasoning(inputs="q", outputs="a") == {"key": "score", "score": yes, "comment": None, "metadata": None}
    choices = create_llm_as_judge(prompt="Rate {outputs}", model="openai:gpt-4o-mini", choices=[0.0, 0.5, 1.0])
    assert choices(outputs="a")["score"] == (1.0 if yes else 0.0)


def test_a_reference_variable_not_given_is_a_key_error_and_no_request(env: tuple[str, bool], verdict: Any) -> None:
    ev = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, model="openai:gpt-4o-mini")
    with pytest.raises(KeyError):
        ev(inputs="q", outputs="a")
    assert verdict[1].bodies == []


def test_a_pydantic_output_schema_gives_an_instance(env: tuple[str, bool]) -> None:
    from pydantic import BaseModel

    class Equality(BaseModel):
        justification: str
        are_equal: bool

    _, yes = env
    ev = create_llm_as_judge(prompt="Equal? {inputs} {outputs}", output_schema=Equality, model="openai:gpt-4o-mini")
    result = ev(inputs={"a": 1}, outputs={"a": 1})
    assert isinstance(result, Equality) and result.are_equal is yes and result.justification

    async def main() -> Any:
        return await create_async_llm_as_judge(
            prompt="Equal? {inputs} {outputs}", output_schema=Equality, model="openai:gpt-4o-mini"
        )(inputs=1, outputs=1)

    assert isinstance(anyio.run(main), Equality)


def chat_models(url: str) -> list[Any]:
    import langchain_openai

    models = [langchain_openai.ChatOpenAI(model="gpt-4o-mini", max_retries=0)]
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    models.append(langchain_anthropic.ChatAnthropic(model_name="claude-3-5-haiku-latest", max_retries=0))
    return models


def test_langchain_chat_models_answer_every_repeated_sync_call(env: tuple[str, bool]) -> None:
    """Calls 2, 4 and 6 of a ChatOpenAI judge failed with "Event loop is closed"."""
    url, yes = env
    for model in chat_models(url):
        ev = create_llm_as_judge(prompt=CONCISENESS_PROMPT, judge=model)
        scores = [ev(inputs="q", outputs=f"answer {i}")["score"] for i in range(6)]
        assert scores == [yes] * 6, type(model).__name__


async def record(aev: Any, output: str, into: list[Any]) -> None:
    into.append((await aev(inputs="q", outputs=output))["score"])


def test_langchain_chat_models_answer_repeated_async_calls_and_mixed(env: tuple[str, bool]) -> None:
    url, yes = env
    for model in chat_models(url):
        aev = create_async_llm_as_judge(prompt=CONCISENESS_PROMPT, judge=model)
        sync = create_llm_as_judge(prompt=CONCISENESS_PROMPT, judge=model)

        async def main(aev: Any = aev) -> list[Any]:
            first = [(await aev(inputs="q", outputs=str(i)))["score"] for i in range(3)]
            return first + [
                r["score"] for r in [await aev(inputs="q", outputs="x"), await aev(inputs="q", outputs="y")]
            ]

        assert anyio.run(main) == [yes] * 5
        assert anyio.run(main) == [yes] * 5  # a second loop
        assert [sync(inputs="q", outputs=str(i))["score"] for i in range(2)] == [yes] * 2


def test_a_simulation_whose_app_returns_openai_sdk_messages(env: tuple[str, bool]) -> None:
    from langchain_openai import ChatOpenAI
    from openai import OpenAI

    from assay.compat.openevals.simulators import create_llm_simulated_user, run_multiturn_simulation

    _, yes = env
    client = OpenAI()

    def app(inputs: dict[str, Any], *, thread_id: str) -> Any:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[inputs])
        return reply.choices[0].message  # an openai.types.chat.ChatCompletionMessage, not a dict

    judge = create_llm_as_judge(prompt="Was the user satisfied?\n{outputs}", model="openai:gpt-4o-mini")
    for _ in range(2):  # twice: a LangChain user model would hit a closed loop on the second run
        user = create_llm_simulated_user(
            system="You want a refund.",
            client=ChatOpenAI(model="gpt-4o-mini", max_retries=0),
            fixed_responses=[{"role": "user", "content": "I want a refund!"}],
        )
        res = run_multiturn_simulation(app=app, user=user, trajectory_evaluators=[judge], max_turns=2)
        assert res["evaluator_results"][0]["score"] is yes
        assert [m["role"] for m in res["trajectory"]] == ["user", "assistant", "user", "assistant"]
        assert res["trajectory"][1]["content"] == ("yes" if yes else "no")


PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwADhQGAWjR9awAAAABJRU5ErkJggg=="
)


def test_the_low_level_scorer_sends_attachments(env: tuple[str, bool], verdict: Any) -> None:
    from openai import OpenAI

    _, yes = env
    rule = verdict[1]
    scorer = _create_llm_as_judge_scorer(prompt="Evaluate: {outputs}\n{attachments}", model="openai:gpt-4o-mini")
    assert scorer(outputs="a fruit bowl", attachments={"mime_type": "image/png", "data": PNG}) == (
        yes,
        "Stand-in reasoning.",
    )
    content = rule.bodies[-1]["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image_url"] and content[1]["image_url"]["url"] == PNG
    raw = _create_llm_as_judge_scorer(prompt="{outputs}\n{attachments}", judge=OpenAI(), model="openai:gpt-4o-mini")
    assert raw(outputs="x", attachments=[PNG, PNG]) == (yes, "Stand-in reasoning.")
    body = rule.bodies[-1]
    assert body["model"] == "gpt-4o-mini" and body["response_format"]["type"] == "json_schema"
    assert [b["type"] for b in body["messages"][0]["content"]] == ["text", "image_url", "image_url"]
    plain = _create_llm_as_judge_scorer(prompt="Evaluate: {outputs}", model="openai:gpt-4o-mini", use_reasoning=False)
    assert plain(outputs="x") is yes and isinstance(rule.bodies[-1]["messages"][0]["content"], str)


# -- what openevals' trajectory/ and agentevals' graph_trajectory/ repository tests check (not in
# the sdists tests/reference runs): the judges' verdict, sync and async, with and without a reference

WEATHER = [
    {"role": "user", "content": "What is the weather in SF?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "SF"}'}}],
    },
    {"role": "tool", "content": "It's 80 degrees and sunny in SF."},
    {"role": "assistant", "content": "The weather in SF is 80 degrees and sunny."},
]


@pytest.mark.parametrize("face", ["openevals", "agentevals"])
def test_trajectory_judges_give_the_verdict_sync_and_async(env: tuple[str, bool], verdict: Any, face: str) -> None:
    import importlib

    llm = importlib.import_module(f"assay.compat.{face}.trajectory.llm")
    _, yes = env
    rule = verdict[1]
    no_ref = llm.create_trajectory_llm_as_judge(prompt=llm.TRAJECTORY_ACCURACY_PROMPT, model="openai:gpt-4o-mini")
    result = no_ref(outputs=WEATHER)
    assert (result["key"], result["score"]) == ("trajectory_accuracy", yes)
    assert "get_weather" in json.dumps(rule.bodies[-1]["messages"])
    with_ref = llm.create_trajectory_llm_as_judge(
        prompt=llm.TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE, model="openai:gpt-4o-mini", feedback_key="accuracy"
    )
    result = with_ref(outputs=WEATHER, reference_outputs=WEATHER[:2])
    assert (result["key"], result["score"]) == ("accuracy", yes)
    continuous = llm.create_trajectory_llm_as_judge(model="openai:gpt-4o-mini", continuous=True)
    assert continuous(outputs=WEATHER)["score"] == (1.0 if yes else 0.0)

    async def main() -> Any:
        judge = llm.create_async_trajectory_llm_as_judge(model="openai:gpt-4o-mini")
        return [(await judge(outputs=WEATHER))["score"] for _ in range(2)]

    assert anyio.run(main) == [yes, yes]


def test_graph_trajectory_through_the_agentevals_paths(env: tuple[str, bool]) -> None:
    pytest.importorskip("langgraph")
    from assay.compat.agentevals.graph_trajectory.llm import (
        create_async_graph_trajectory_llm_as_judge,
        create_graph_trajectory_llm_as_judge,
    )
    from assay.compat.agentevals.graph_trajectory.strict import graph_trajectory_strict_match
    from assay.compat.agentevals.graph_trajectory.utils import extract_langgraph_trajectory_from_thread
    from tests.unit.evaluators.test_graph_trajectory import run_thread

    _, yes = env
    graph, config = run_thread("compat")
    extracted = extract_langgraph_trajectory_from_thread(graph, config)
    steps = [["__start__", "agent", "tools", "agent"]]
    assert extracted["outputs"]["steps"] == steps
    same = graph_trajectory_strict_match(outputs=extracted["outputs"], reference_outputs={"steps": steps})
    assert same == {"key": "graph_trajectory_strict_match", "score": True, "comment": None, "metadata": None}
    other = {"steps": [["__start__", "tools", "agent", "agent"]]}
    assert graph_trajectory_strict_match(outputs=extracted["outputs"], reference_outputs=other)["score"] is False
    judge = create_graph_trajectory_llm_as_judge(model="openai:gpt-4o-mini")
    result = judge(inputs=extracted["inputs"], outputs=extracted["outputs"])
    assert (result["key"], result["score"]) == ("graph_trajectory_accuracy", yes)

    async def main() -> Any:
        ajudge = create_async_graph_trajectory_llm_as_judge(model="openai:gpt-4o-mini")
        return (await ajudge(inputs=extracted["inputs"], outputs=extracted["outputs"]))["score"]

    assert anyio.run(main) is yes
