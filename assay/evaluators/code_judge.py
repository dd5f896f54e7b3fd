"""Code judge: an LLM grades the code in the agent's answer, with or without reference code.

The code is extracted first (``code_extraction``):

* ``none`` — the whole final answer is the code;
* ``markdown_code_blocks`` — every fenced block whose opening fence starts a line (language tag
  of word characters only) and whose closing fence stands alone on its line; blocks tagged as
  shell or data (``bash``, ``sh``, ``shell``, ``zsh``, ``fish``, ``console``, ``terminal``,
  ``json``; case-sensitive, as in openevals) are skipped; the blocks are joined with a newline;
* ``llm`` — the judge itself is asked first to extract the code (a second call; openevals'
  ``code_extraction_strategy="llm"``);
* ``"module:function"`` — your extractor, called with the final output, returning the code
  (or None/"" when there is none). ``code_extractor`` (openevals' name) takes the same, or a
  Python callable in the library face; ``code_extraction_strategy`` is accepted for
  ``code_extraction``.

When no code is found the judge is not called: the result is a fail (score 0.0, value False)
with ``metadata["code_extraction_failed"] = True``, as in openevals.

>>> extract_markdown_code("Here:\\n```python\\nprint(1)\\n```\\n```bash\\nls\\n```")
'print(1)'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec
from pydantic import AliasChoices, Field

from assay.evaluators.code import load_function
from assay.evaluators.code import output_text as code_output_text
from assay.evaluators.judge_base import JudgeCalls
from assay.evaluators.judge_render import delimit
from assay.evaluators.llm_judge import CompiledPrompt, LLMJudge, LLMJudgeParams
from assay.exceptions import ConfigError, EvaluatorError
from assay.judges.base import JudgeRequest
from assay.judges.verdict import response_object
from assay.loading import load_callable
from assay.records import Result
from assay.traces.model import Trace, content_text

SKIPPED_LANGUAGES = frozenset({"bash", "sh", "shell", "zsh", "fish", "console", "terminal", "json"})
_OPEN = re.compile(r"^```(\w*)\s*$")
_CLOSE = re.compile(r"^```\s*$")


def extract_markdown_code(text: str) -> str | None:
    """The code of the fenced blocks in ``text`` (shell/JSON blocks skipped), or None."""
    blocks: list[str] = []
    lang: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        if lang is None:
            m = _OPEN.match(line)
            if m:
                lang, body = m.group(1), []
        elif _CLOSE.match(line):
            if lang not in SKIPPED_LANGUAGES:
                blocks.append("\n".join(body))
            lang = None
        else:
            body.append(line)
    return "\n".join(blocks) if blocks else None


def output_text(value: Any) -> str:
    """The text code is extracted from: a string, a message's ``content``, the last of ``messages``."""
    text = code_output_text(value)
    if text is not None:
        return text
    if isinstance(value, dict):
        msgs = value.get("messages")
        if isinstance(msgs, list) and msgs:  # a last message that is not a dict
            return content_text(msgs[-1])
    if value is None:
        return ""
    raise EvaluatorError(f"cannot extract code from a {type(value).__name__} output")


class CodeJudgeParams(LLMJudgeParams):
    prompt: str = ""
    """A template or prebuilt prompt name; empty: ``code_correctness``, or
    ``code_correctness_with_reference`` when the record has reference code."""
    code_extraction: str = Field("none", validation_alias=AliasChoices("code_extraction", "code_extraction_strategy"))
    """none | markdown_code_blocks | llm | "module:function" (your extractor: output → code)."""
    code_extractor: str | Callable[..., Any] | None = None
    """Your extractor (openevals' name): ``"module:function"`` or a callable, output → code."""


class CodeJudge(LLMJudge):
    """LLM judge of code correctness, after extracting the code from the answer."""

    name: ClassVar[str] = "code_judge"
    description: ClassVar[str] = (
        "LLM judge of code correctness (with or without reference code), after extracting the code "
        "from markdown blocks or with your extractor."
    )
    Params = CodeJudgeParams
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini", "code_extraction": "markdown_code_blocks"}
    fallback_key: ClassVar[str] = "code_correctness"

    params: CodeJudgeParams

    def default_key(self) -> str:
        return self.params.feedback_key or self.fallback_key

    def setup(self) -> None:
        super().setup()
        if not self.params.prompt:
            self._free = self.compile("code_correctness")
            self._with_ref = self.compile("code_correctness_with_reference")
        p = self.params
        if p.code_extractor is not None:
            if p.code_extraction != "none":
                raise ConfigError(
                    f"evaluator {self.name!r}: params.code_extractor cannot be combined with code_extraction"
                )
            self._extract = load_function(p.code_extractor, f"evaluator {self.name!r}: params.code_extractor")
        else:
            self._extract = self._extractor(p.code_extraction)

    def _extractor(self, how: str) -> Callable[[Any], str | None]:
        if how in ("none", "llm"):  # llm: the judge extracts first (judge_trace), then the text is the code
            return output_text
        if how == "markdown_code_blocks":
            return lambda value: extract_markdown_code(output_text(value))
        module_name, sep, attr = how.partition(":")
        if not sep or not module_name or not attr:
            raise ConfigError(
                f"evaluator {self.name!r}: params.code_extraction: expected none, markdown_code_blocks, llm "
                f"or 'module:function' (got {how!r})"
            )
        return load_callable(how, f"evaluator {self.name!r}: params.code_extraction")

    def prompt_for(self, trace: Trace) -> CompiledPrompt:
        if self.params.prompt:
            return self._main
        return self._with_ref if trace.reference is not None else self._free

    def code_of(self, trace: Trace) -> str | None:
        try:
            code = self._extract(trace.final_output)
        except EvaluatorError:
            raise
        except Exception as exc:  # a user extractor failing is that record's error, not the run's
            raise EvaluatorError(f"code extractor failed: {type(exc).__name__}: {exc}") from exc
        return code if isinstance(code, str) and code.strip() else None

    def outputs_text(self, trace: Trace, compiled: CompiledPrompt) -> str | None:
        return self.code_of(trace)

    def prepare(self, trace: Trace) -> tuple[JudgeRequest, CompiledPrompt] | Result:
        if self.code_of(trace) is None:
            return Result(self.key, 0.0, False, "no code found in the output", {"code_extraction_failed": True})
        return super().prepare(trace)

    def extraction_request(self, trace: Trace) -> JudgeRequest:
        """The first call of ``code_extraction: llm``: ask the judge for the code in the output."""
        schema = {
            "type": "object",
            "properties": {
                "has_code": {"type": "boolean", "description": "whether the output contains code"},
                "code": {"type": "string", "description": "the code, verbatim, without markdown fences"},
            },
            "required": ["has_code", "code"],
            "additionalProperties": False,
        }
        prompt = (
            "Extract the source code from the following output, verbatim and without markdown fences or "
            "surrounding prose. If it contains no code, answer has_code false and code empty.\n\n"
            f"<output>\n{delimit(output_text(trace.final_output) or '')}\n</output>"
        )
        req = self.request([{"role": "user", "content": prompt}], schema)
        req.schema_name = "code_extraction"
        return req

    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        main = super().requests_for(trace)
        if self.params.code_extraction == "llm" and self.code_of(trace) is not None:
            return [self.extraction_request(trace), *main]
        return main

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        if self.params.code_extraction == "llm" and self.code_of(trace) is not None:
            obj, _ = response_object(await calls.complete(self.extraction_request(trace)))
            code = obj.get("code")
            if obj.get("has_code") is False or not isinstance(code, str) or not code.strip():
                return Result(
                    self.key, 0.0, False, "the judge found no code in the output", {"code_extraction_failed": True}
                )
            trace = msgspec.structs.replace(trace, final_output=code)
        return await super().judge_trace(trace, calls)


__all__ = ["CodeJudge", "CodeJudgeParams", "extract_markdown_code"]
