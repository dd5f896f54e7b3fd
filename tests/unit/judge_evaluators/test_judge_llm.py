from __future__ import annotations

from typing import Any

import anyio
import pytest

from assay.evaluators.llm_judge import LLMJudge
from assay.exceptions import BudgetExceeded, ConfigError, JudgeRetryableError
from assay.registry import build_evaluator
from assay.traces.normalize import trace_from_args

TRAJ = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "18C and sunny " + "x" * 1000},
    {"role": "assistant", "content": "It is 18C and sunny."},
]


def test_prebuilt_correctness_request_and_result(scripted: Any) -> None:
    judge = scripted({"reasoning": "Matches the reference.", "score": True})
    ev = build_evaluator("llm_judge", {"prompt": "correctness", "judge": judge})
    r = ev.evaluate(inputs="capital of France?", outputs="Paris", reference_outputs="Paris, France")
    assert (r.key, r.score, r.value, r.comment, r.error) == ("correctness", 1.0, True, "Matches the reference.", None)
    assert r.metadata["usage"]["calls"] == 1 and r.metadata["usage"]["input_tokens"] == 100
    assert r.metadata["usage"]["cached"] is False and r.metadata["judge_model"] == "fake-1"
    req = judge.requests[0]
    text = judge.prompt()
    assert "capital of France?" in text and "Paris, France" in text
    assert req.schema is not None and req.schema["properties"]["score"]["type"] == "boolean"
    assert req.schema_name == "correctness" and req.metadata == {"evaluator": "correctness"}
    assert (
        ev.build_requests(trace_from_args("Paris", "Paris, France", "capital of France?"))[0].messages == req.messages
    )


def test_feedback_key_defaults() -> None:
    assert LLMJudge(prompt="Is {outputs} nice?").key == "score"
    assert LLMJudge(prompt="Is {outputs} nice?", feedback_key="nice").key == "nice"
    assert LLMJudge(prompt="toxicity", key="tox").key == "tox"


def test_extra_variables_from_scenario_and_params(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": False})
    ev = LLMJudge(prompt="Plan: {plan}\nStyle: {style}\nAnswer: {outputs}", judge=judge, variables={"style": "terse"})
    r = ev.evaluate(outputs="done", plan=["step 1", "step 2"])
    assert r.score == 0.0 and r.value is False
    assert judge.prompt() == 'Plan: ["step 1","step 2"]\nStyle: terse\nAnswer: done'


def test_missing_variable_is_an_error_result_without_a_call(scripted: Any) -> None:
    judge = scripted({"score": True})
    r = LLMJudge(prompt="correctness", judge=judge).evaluate(outputs="Paris")
    assert r.score is None and r.error is not None and "{inputs}" in r.error
    assert judge.requests == []
    r = LLMJudge(prompt="Is {outputs} consistent with {policy}?", judge=judge).evaluate(outputs="x")
    assert r.error is not None and "{policy}" in r.error


def test_optional_variable_rendered_as_none(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": True})
    r = LLMJudge(prompt="correctness", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.score == 1.0
    assert "<reference_answer>\n(none)\n</reference_answer>" in judge.prompt()


@pytest.mark.parametrize(("raw", "score"), [(True, 0.0), (False, 1.0), ("false", 1.0)])
def test_true_is_bad_polarity_inverts_score_keeps_value(scripted: Any, raw: Any, score: float) -> None:
    judge = scripted({"reasoning": "r", "score": raw})
    r = LLMJudge(prompt="toxicity", judge=judge).evaluate(inputs="hi", outputs="hello")
    assert r.score == score and r.value is (raw is True)
    assert r.metadata["polarity"] == "true_is_bad"


def test_polarity_override_for_custom_prompt(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": 0.8})
    r = LLMJudge(prompt="How rude is {outputs}?", continuous=True, polarity="true_is_bad", judge=judge).evaluate(
        outputs="x"
    )
    assert r.value == 0.8 and r.score == pytest.approx(0.2)


def test_continuous_and_choices(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": 0.4})
    ev = LLMJudge(prompt="conciseness", continuous=True, judge=judge)
    assert ev.evaluate(inputs="q", outputs="a").score == 0.4
    assert judge.requests[0].schema["properties"]["score"]["type"] == "number"
    judge = scripted({"reasoning": "r", "score": "partly"})
    ev = LLMJudge(prompt="conciseness", choices={"yes": 1.0, "partly": 0.5, "no": 0.0}, judge=judge)
    r = ev.evaluate(inputs="q", outputs="a")
    assert (r.score, r.value) == (0.5, "partly")
    assert judge.requests[0].schema["properties"]["score"]["enum"] == ["yes", "partly", "no"]


def test_categorical_prompts(scripted: Any) -> None:
    judge = scripted({"reasoning": "refund request", "score": "account & billing"})
    r = LLMJudge(prompt="support_intent", judge=judge).evaluate(outputs=TRAJ)
    assert r.value == "Account & Billing" and r.score is None and r.error is None
    assert judge.requests[0].schema["properties"]["score"]["enum"][0] == "Account & Billing"
    judge = scripted({"reasoning": "r", "label": "French"})
    r = LLMJudge(prompt="language_detection", judge=judge).evaluate(outputs="Bonjour")
    assert (r.value, r.score) == ("French", None)


def test_conversation_prompts_render_compact_trajectory(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": True})
    LLMJudge(prompt="task_completion", judge=judge, max_tool_result_chars=40).evaluate(outputs=TRAJ)
    text = judge.prompt()
    assert "[user] weather in Paris?" in text
    assert '[assistant] -> get_weather({"city":"Paris"})' in text
    assert "[tool get_weather] 18C and sunny" in text and "more chars]" in text
    assert "x" * 100 not in text


def test_system_and_few_shot(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": True})
    ev = LLMJudge(
        prompt="Is {outputs} polite?",
        system="Be strict.",
        few_shot_examples=[{"inputs": "q", "outputs": "Go away", "reasoning": "rude", "score": False}],
        judge=judge,
    )
    ev.evaluate(outputs="Thank you")
    msgs = judge.requests[0].messages
    assert msgs[0] == {"role": "system", "content": "Be strict."}
    assert msgs[1]["content"].startswith("Is Thank you polite?\n\n")
    assert "<output>Go away</output>\n<reasoning>rude</reasoning>\n<score>false</score>" in msgs[1]["content"]


def test_attachments_into_slot(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": False})
    atts = [
        "https://example.com/cat.png",
        {"mime_type": "image/png", "data": "iVBORw0KGgo="},
        {"mime_type": "audio/wav", "data": "data:audio/wav;base64,UklGRg=="},
        {"mime_type": "application/pdf", "data": "JVBERi0="},
    ]
    r = LLMJudge(prompt="explicit_content", judge=judge).evaluate(inputs="describe", outputs="a cat", attachments=atts)
    assert r.score == 1.0 and r.value is False
    content = judge.requests[0].messages[-1]["content"]
    types = [b["type"] for b in content]
    assert types == ["text", "image_url", "image_url", "input_audio", "file"]
    assert content[1]["image_url"]["url"] == "https://example.com/cat.png"
    assert content[2]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
    assert content[3]["input_audio"] == {"data": "UklGRg==", "format": "wav"}
    assert content[4]["file"]["file_data"] == "data:application/pdf;base64,JVBERi0="


def test_attachments_from_field_path_and_appended(scripted: Any) -> None:
    judge = scripted({"reasoning": "r", "score": True})
    ev = LLMJudge(prompt="Is the image {outputs}?", attachments="media.images", judge=judge)
    ev.evaluate(outputs="a dog", media={"images": ["https://x/y.jpg"]})
    content = judge.requests[0].messages[-1]["content"]
    assert content[0] == {"type": "text", "text": "Is the image a dog?"}
    assert content[1]["type"] == "image_url"


def test_attachments_missing_for_slot(scripted: Any) -> None:
    r = LLMJudge(prompt="audio_quality", judge=scripted({"score": True})).evaluate(outputs="x")
    assert r.error is not None and "{attachments}" in r.error


def test_output_schema_passthrough(scripted: Any) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}, "tone": {"type": "string"}}}
    judge = scripted({"score": 0.7, "tone": "warm", "reasoning": "fine"})
    r = LLMJudge(prompt="Rate {outputs}", output_schema=schema, judge=judge).evaluate(outputs="hi")
    assert r.value == {"score": 0.7, "tone": "warm", "reasoning": "fine"} and r.score == 0.7 and r.comment == "fine"
    assert judge.requests[0].schema == schema


def test_unparseable_answer_is_error_with_raw_output(scripted: Any) -> None:
    judge = scripted("I really cannot say.")
    r = LLMJudge(prompt="conciseness", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.score is None and r.error is not None and "VerdictParseError" in r.error
    assert r.metadata["raw_output"] == "I really cannot say."
    assert r.metadata["usage"]["calls"] == 1


def test_salvaged_text_verdict(scripted: Any) -> None:
    judge = scripted('Looks fine.\n```json\n{"reasoning": "ok", "score": "true"}\n```')
    r = LLMJudge(prompt="conciseness", judge=judge).evaluate(inputs="q", outputs="a")
    assert (r.score, r.value, r.comment) == (1.0, True, "ok") and r.metadata["salvaged"] is True


def test_judge_error_becomes_error_result(scripted: Any) -> None:
    judge = scripted(JudgeRetryableError("HTTP 503 after 5 attempts", status=503))
    r = LLMJudge(prompt="conciseness", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.score is None and "503" in (r.error or "")


def test_budget_exceeded_propagates(scripted: Any) -> None:
    ev = LLMJudge(prompt="conciseness", judge=scripted(BudgetExceeded("budget of $1.00 reached")))
    trace = trace_from_args("a", None, "q")
    with pytest.raises(BudgetExceeded):
        anyio.run(ev.ascore, trace)


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"params\.prompt: no prebuilt prompt named .toxic."):
        LLMJudge(prompt="toxic")
    with pytest.raises(ConfigError, match="invalid placeholder"):
        LLMJudge(prompt="Is {outputs.text} ok?")
    with pytest.raises(ConfigError, match="choices"):
        LLMJudge(prompt="x {outputs}", choices={"a": 2.0})
    with pytest.raises(ConfigError, match="prompt"):
        build_evaluator("llm_judge", {})


def test_judge_required_without_pool() -> None:
    ev = LLMJudge(prompt="conciseness")
    with pytest.raises(ConfigError, match=r"params\.judge is required"):
        ev.evaluate(inputs="q", outputs="a")


def test_build_requests_empty_when_no_call_would_be_made() -> None:
    ev = LLMJudge(prompt="hallucination")
    assert ev.build_requests(trace_from_args("a", None, "q")) == []  # no {context}: error Result, no call
    reqs = ev.build_requests(trace_from_args("a", None, "q", context="ctx"))
    assert len(reqs) == 1 and "ctx" in reqs[0].messages[-1]["content"]
