from __future__ import annotations

from typing import Any

import pytest

from assay.evaluators import TrajectoryJudge
from assay.exceptions import ConfigError
from assay.judges.prompts import PROMPTS, SUPPORT_INTENTS, get_prompt, load_template, template_variables

#: openevals' library (§5.4 of the semantics): name -> variables
EXPECTED = {
    "correctness": {"inputs", "outputs", "reference_outputs"},
    "conciseness": {"inputs", "outputs"},
    "hallucination": {"context", "inputs", "outputs", "reference_outputs"},
    "answer_relevance": {"inputs", "outputs"},
    "plan_adherence": {"inputs", "outputs", "plan"},
    "code_correctness": {"inputs", "outputs"},
    "code_correctness_with_reference": {"inputs", "outputs", "reference_outputs"},
    "laziness": {"inputs", "outputs"},
    "toxicity": {"inputs", "outputs"},
    "fairness": {"inputs", "outputs"},
    "pii_leakage": {"inputs", "outputs"},
    "prompt_injection": {"inputs"},
    "code_injection": {"inputs"},
    "rag_helpfulness": {"inputs", "outputs"},
    "rag_groundedness": {"context", "outputs"},
    "rag_retrieval_relevance": {"context", "inputs"},
    "trajectory_accuracy": {"outputs"},
    "trajectory_accuracy_with_reference": {"outputs", "reference_outputs"},
    "tool_selection": {"outputs"},
    "perceived_error": {"outputs"},
    "wins": {"outputs"},
    "task_completion": {"outputs"},
    "knowledge_retention": {"outputs"},
    "user_satisfaction": {"outputs"},
    "agent_tone": {"outputs"},
    "language_detection": {"outputs"},
    "support_intent": {"outputs"},
    "explicit_content": {"attachments", "inputs", "outputs"},
    "sensitive_imagery": {"attachments", "inputs", "outputs"},
    "audio_quality": {"attachments", "inputs", "outputs"},
    "transcription_accuracy": {"attachments", "inputs", "outputs"},
    "user_interrupts": {"attachments", "inputs", "outputs"},
    "vocal_affect": {"attachments", "inputs", "outputs"},
}
TRUE_IS_BAD = {
    "laziness", "toxicity", "fairness", "pii_leakage", "prompt_injection", "code_injection",
    "perceived_error", "explicit_content", "sensitive_imagery", "audio_quality",
}  # fmt: skip


def test_library_is_complete_with_declared_variables() -> None:
    assert len(PROMPTS) == 33
    assert {name: set(p.variables) for name, p in PROMPTS.items()} == EXPECTED


def test_polarity() -> None:
    assert {n for n, p in PROMPTS.items() if p.polarity == "true_is_bad"} == TRUE_IS_BAD
    assert {n for n, p in PROMPTS.items() if p.polarity == "categorical"} == {"language_detection", "support_intent"}
    assert get_prompt("support_intent").choices == SUPPORT_INTENTS and len(SUPPORT_INTENTS) == 9


def test_optional_variables_exist_in_templates() -> None:
    for p in PROMPTS.values():
        assert p.optional <= p.variables, p.name


def test_templates_format_and_are_our_own_words() -> None:
    for name, p in PROMPTS.items():
        text = p.template.format(**{v: f"<<{v}>>" for v in p.variables})
        for v in p.variables:
            assert f"<<{v}>>" in text
        # openevals' prompts open with "You are an expert data labeler"; ours must not copy them
        assert "expert data labeler" not in text.lower(), name
        assert "<Rubric>" not in text, name


def test_internal_templates() -> None:
    assert template_variables(load_template("_groundedness")) == {"question", "context", "answer"}
    assert template_variables(load_template("_rubric_node")) == {"context", "question", "options"}


def test_unknown_and_invalid() -> None:
    with pytest.raises(ConfigError, match="no prebuilt prompt named 'corectness'"):
        get_prompt("corectness")
    with pytest.raises(ConfigError, match="invalid placeholder"):
        template_variables("score {outputs[0]}")


def test_a_prompt_without_outputs_gets_the_trace_appended(scripted: Any) -> None:
    """The catalog's domain prompt names no variable: the judge must still see the trajectory."""

    support_eval_prompt = """
You are evaluating a customer support agent. Score the trajectory on:
1. Did the agent resolve the customer's issue?
Score 1.0 if all criteria met, 0.5 for partial, 0.0 for failure.
Explain your reasoning.
"""
    judge = scripted({"reasoning": "fine", "score": 0.5})
    ev = TrajectoryJudge(prompt=support_eval_prompt, judge=judge, continuous=True)
    call = {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"id": 7}'}}
    outputs = [
        {"role": "user", "content": "refund order 7"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "Refunded."},
    ]
    assert ev.evaluate(outputs=outputs, reference_outputs=outputs[:2]).score == 0.5
    prompt = judge.prompt()
    assert prompt.startswith("\nYou are evaluating a customer support agent.")
    assert "<outputs>" in prompt and "lookup_order" in prompt and "Refunded." in prompt
    assert "<inputs>\nrefund order 7\n</inputs>" in prompt and "<reference_outputs>" in prompt
