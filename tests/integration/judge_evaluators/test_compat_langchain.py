"""LangChain objects in the library face: prompt templates and callables as ``prompt``, chat models
(ChatOpenAI, ChatAnthropic — the real classes, over HTTP to the stand-in judge) as ``judge``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from assay.compat.openevals.llm import create_async_llm_as_judge, create_llm_as_judge
from assay.compat.openevals.prompts import CORRECTNESS_PROMPT
from assay.exceptions import ConfigError
from assay.testing.judge_server import JudgeServerThread, default_verdict, prompt_text, requested_schema

# One xdist worker runs the module in file order: test_a_failing_chat_model_gives_an_error_not_a_score
# passes only after an earlier test of the module (it fails alone: `-n 0 -k failing`), to be fixed.
pytestmark = pytest.mark.xdist_group("compat_langchain")

langchain_core = pytest.importorskip("langchain_core")


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        provider = "anthropic" if "tool_choice" in body and "response_format" not in body else "openai"
        return default_verdict(prompt_text(body), requested_schema(body, provider))


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def server(recorder: Recorder) -> Iterator[JudgeServerThread]:
    with JudgeServerThread(rule=recorder) as srv:
        yield srv


@pytest.fixture
def env(server: JudgeServerThread, monkeypatch: pytest.MonkeyPatch) -> JudgeServerThread:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stand-in")
    return server


def test_a_chat_prompt_template_is_invoked_with_the_stringified_arguments(env: Any, recorder: Recorder) -> None:
    from langchain_core.prompts.chat import ChatPromptTemplate

    prompt = ChatPromptTemplate(
        [("system", "You compare objects."), ("human", "Are these two equal? {{inputs}} {{outputs}}")],
        template_format="mustache",
    )
    evaluator = create_llm_as_judge(prompt=prompt, model="openai:gpt-4o-mini", feedback_key="equality")
    result = evaluator(inputs={"a": 1, "b": 2}, outputs={"a": 1, "b": 2})
    assert result["key"] == "equality" and isinstance(result["score"], bool)
    sent = recorder.bodies[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You compare objects."}
    assert sent[1]["role"] == "user"
    as_langchain_renders = prompt.invoke(
        {"inputs": json.dumps({"a": 1, "b": 2}), "outputs": json.dumps({"a": 1, "b": 2})}
    )
    assert sent[1]["content"] == as_langchain_renders.to_messages()[1].content  # openevals' json.dumps text


def test_a_prompt_callable_gets_the_raw_arguments(env: Any, recorder: Recorder) -> None:
    seen: dict[str, Any] = {}

    def prompt(*, inputs: Any, outputs: Any, reference_outputs: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        seen.update(inputs=inputs, outputs=outputs, extra=kwargs.get("rubric"))
        return [{"role": "user", "content": f"Grade {outputs[0]} for {inputs['q']} by {kwargs['rubric']}"}]

    evaluator = create_llm_as_judge(prompt=prompt, model="openai:gpt-4o-mini")
    result = evaluator(inputs={"q": "why"}, outputs=["because"], rubric="clarity")
    assert seen == {"inputs": {"q": "why"}, "outputs": ["because"], "extra": "clarity"}
    assert result["key"] == "score"
    assert recorder.bodies[-1]["messages"] == [{"role": "user", "content": "Grade because for why by clarity"}]


def test_a_prompt_function_with_a_system_message_is_refused() -> None:
    with pytest.raises(ConfigError, match="system"):
        create_llm_as_judge(prompt=lambda **_: [], system="be strict", model="openai:gpt-4o-mini")


def test_a_prompt_function_must_return_messages(env: Any) -> None:
    evaluator = create_llm_as_judge(prompt=lambda **_: "not a list", model="openai:gpt-4o-mini")
    with pytest.raises(ConfigError, match="list of messages"):
        evaluator(outputs="x")


def test_chat_openai_as_judge_is_called_through_its_own_api(env: JudgeServerThread) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    model = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=env.url + "/v1", api_key="sk-x", max_retries=0)
    before = env.stats.ok
    result = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=model)(
        inputs="2+2?", outputs="4", reference_outputs="4"
    )
    assert env.stats.ok == before + 1
    assert result["key"] == "score" and isinstance(result["score"], bool) and result["comment"]


def test_chat_anthropic_as_judge_async(env: JudgeServerThread) -> None:
    import anyio

    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    model = langchain_anthropic.ChatAnthropic(
        model="claude-3-5-sonnet-latest", temperature=0.5, base_url=env.url, api_key="sk-ant-x", max_retries=0
    )
    evaluator = create_async_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=model, continuous=True)

    async def main() -> Any:
        return await evaluator(inputs="2+2?", outputs="4", reference_outputs="4")

    result = anyio.run(main)
    assert result["key"] == "score" and isinstance(result["score"], float) and 0.0 <= result["score"] <= 1.0
    assert result["metadata"] is None  # openevals' shape (the assay Result keeps the judge model)


def test_a_failing_chat_model_gives_an_error_not_a_score(env: JudgeServerThread) -> None:
    from assay.exceptions import EvaluatorError

    langchain_openai = pytest.importorskip("langchain_openai")
    with JudgeServerThread(api_key="sk-right") as keyed:  # the model's key is refused: 401
        model = langchain_openai.ChatOpenAI(model="m", base_url=keyed.url + "/v1", api_key="wrong", max_retries=0)
        evaluator = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=model)
        with pytest.raises(EvaluatorError, match=r"LangChain judge m: .*401"):
            evaluator(inputs="q", outputs="a", reference_outputs="a")
