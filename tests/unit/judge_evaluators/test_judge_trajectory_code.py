from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from assay.evaluators.code_judge import CodeJudge, extract_markdown_code
from assay.evaluators.judge_trajectory import TrajectoryJudge
from assay.exceptions import ConfigError
from assay.registry import build_evaluator

CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "flights"}'}}
TRAJ = [
    {"role": "user", "content": "find flights"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "LH123"},
    {"role": "assistant", "content": "Found LH123."},
]


class TestTrajectoryJudge:
    def test_reference_free_without_reference(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "fine", "score": True})
        r = build_evaluator("trajectory_judge", {"judge": judge}).evaluate(outputs=TRAJ)
        assert (r.key, r.score, r.value) == ("trajectory_accuracy", 1.0, True)
        text = judge.prompt()
        assert "<reference_trajectory>" not in text
        assert '[assistant] -> search({"q":"flights"})' in text and "[tool search] LH123" in text

    def test_with_reference_when_present(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "differs", "score": 0.25})
        ev = TrajectoryJudge(judge=judge, continuous=True)
        r = ev.evaluate(outputs=TRAJ, reference_outputs=TRAJ[:2])
        assert r.score == 0.25
        assert "<reference_trajectory>\n[user] find flights\n[assistant] -> search" in judge.prompt()

    def test_reference_modes(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "r", "score": True})
        r = TrajectoryJudge(judge=judge, reference="required").evaluate(outputs=TRAJ)
        assert r.error is not None and "reference" in r.error and judge.requests == []
        TrajectoryJudge(judge=judge, reference="ignore").evaluate(outputs=TRAJ, reference_outputs=TRAJ)
        assert "<reference_trajectory>" not in judge.prompt()

    def test_custom_prompt(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "r", "score": True})
        TrajectoryJudge(prompt="tool_selection", judge=judge).evaluate(outputs=TRAJ)
        assert "chose its tools" in judge.prompt()


FENCED = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\nRun it:\n```bash\npython add.py\n```\n"


class TestCodeExtraction:
    def test_markdown_blocks_rules(self) -> None:
        assert extract_markdown_code(FENCED) == "def add(a, b):\n    return a + b"
        two = "```\nx = 1\n```\ntext\n```Python\ny = 2\n```"
        assert extract_markdown_code(two) == "x = 1\ny = 2"
        assert extract_markdown_code("```json\n{}\n```") is None
        assert extract_markdown_code("  ```python\nindented fence\n```") is None
        assert extract_markdown_code("```c++\nint x;\n```") is None
        assert extract_markdown_code("no code") is None


class TestCodeJudge:
    def test_extracts_then_judges(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "correct", "score": True})
        ev = CodeJudge(judge=judge, code_extraction="markdown_code_blocks")
        r = ev.evaluate(inputs="write add", outputs=FENCED)
        assert (r.key, r.score) == ("code_correctness", 1.0)
        text = judge.prompt()
        assert "<code>\ndef add(a, b):\n    return a + b\n</code>" in text
        assert "python add.py" not in text

    def test_reference_prompt(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "r", "score": False})
        r = CodeJudge(judge=judge).evaluate(inputs="t", outputs="return 1", reference_outputs="return 2")
        assert r.score == 0.0
        assert "<reference_code>\nreturn 2\n</reference_code>" in judge.prompt()

    def test_no_code_found_is_a_fail_without_a_call(self, scripted: Any) -> None:
        judge = scripted({"score": True})
        ev = CodeJudge(judge=judge, code_extraction="markdown_code_blocks")
        r = ev.evaluate(inputs="t", outputs="I can't write that.")
        assert (r.score, r.value, r.metadata["code_extraction_failed"]) == (0.0, False, True)
        assert judge.requests == []
        assert ev.build_requests(ev_trace("I can't")) == []

    def test_user_extractor(self, scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        mod = types.ModuleType("my_extractors")
        mod.between = lambda out: out.split("<code>")[1].split("</code>")[0]  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "my_extractors", mod)
        judge = scripted({"reasoning": "r", "score": True})
        CodeJudge(judge=judge, code_extraction="my_extractors:between").evaluate(
            inputs="t", outputs="see <code>print(1)</code>"
        )
        assert "<code>\nprint(1)\n</code>" in judge.prompt()
        r = CodeJudge(judge=judge, code_extraction="my_extractors:between").evaluate(inputs="t", outputs="none")
        assert r.error is not None and "extractor failed" in r.error

    def test_bad_extraction_config(self) -> None:
        with pytest.raises(ConfigError, match="code_extraction"):
            CodeJudge(code_extraction="markdown")
        with pytest.raises(ConfigError, match="cannot load"):
            CodeJudge(code_extraction="no_such_module_x:f")


def ev_trace(text: str) -> Any:
    from assay.traces.normalize import trace_from_args

    return trace_from_args(text, None, "t")


class TestOpenevalsSpellings:
    def test_code_extraction_strategy_and_callable_extractor(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "r", "score": True})
        ev = CodeJudge(judge=judge, code_extraction_strategy="markdown_code_blocks")
        assert ev.evaluate(inputs="t", outputs=FENCED).score == 1.0
        ev = CodeJudge(judge=judge, code_extractor=lambda out: out.split("|")[1])
        ev.evaluate(inputs="t", outputs="a|print(2)|b")
        assert "<code>\nprint(2)\n</code>" in judge.prompt()
        with pytest.raises(ConfigError, match="cannot be combined"):
            CodeJudge(code_extractor=str, code_extraction="markdown_code_blocks")

    def test_llm_extraction(self, scripted: Any) -> None:
        judge = scripted({"has_code": True, "code": "def f():\n    return 1"}, {"reasoning": "ok", "score": True})
        ev = CodeJudge(judge=judge, code_extraction_strategy="llm")
        r = ev.evaluate(inputs="write f", outputs="Sure! def f(): return 1 — that's it.")
        assert r.score == 1.0 and len(judge.requests) == 2
        assert "Sure!" in judge.prompt(0) and "<code>\ndef f():\n    return 1\n</code>" in judge.prompt(1)
        assert r.metadata["usage"]["calls"] == 2
        none = scripted({"has_code": False, "code": ""})
        r = CodeJudge(judge=none, code_extraction="llm").evaluate(inputs="t", outputs="no code here")
        assert (r.score, r.metadata["code_extraction_failed"]) == (0.0, True)

    def test_code_check_accepts_a_callable_extractor(self) -> None:
        from assay.evaluators import MypyCheck

        ev = MypyCheck(code_extractor=lambda out: out)
        assert callable(ev.params.code_extractor)

    def test_output_schema_as_typeddict_or_pydantic_model(self, scripted: Any) -> None:
        from pydantic import BaseModel
        from typing_extensions import TypedDict

        from assay.evaluators import LLMJudge

        class EqualityResult(TypedDict):
            equality_justification: str
            are_equal: bool

        class Model(BaseModel):
            equality_justification: str
            are_equal: bool

        for schema in (EqualityResult, Model):
            judge = scripted({"equality_justification": "same", "are_equal": True})
            ev = LLMJudge(
                prompt="Are the following two values equal? {inputs} {outputs}", output_schema=schema, judge=judge
            )
            r = ev.evaluate(inputs="a", outputs="a")
            assert r.value == {"equality_justification": "same", "are_equal": True}
            assert set(judge.requests[0].schema["properties"]) == {"equality_justification", "are_equal"}  # type: ignore[index]
