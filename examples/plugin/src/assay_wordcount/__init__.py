"""An example assay plugin: one evaluator registered through the ``assay.evaluators`` entry point.

Once this package is installed (``pip install -e examples/plugin``), ``word_count`` is available
everywhere assay builds evaluators by name: run files, ``assay score -e word_count:max_words=50``,
``assay evaluators show word_count`` and ``assay.build_evaluator("word_count")``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from assay.evaluators import Evaluator, EvaluatorParams
from assay.records import Result
from assay.traces.model import Trace

__all__ = ["WordCount", "WordCountParams"]


class WordCountParams(EvaluatorParams):
    max_words: int = Field(100, ge=1)
    """The word budget of the final answer."""


class WordCount(Evaluator[WordCountParams]):
    """The final answer has at most ``max_words`` words (score 1.0 / 0.0; value = the count)."""

    name: ClassVar[str] = "word_count"
    description: ClassVar[str] = "The final answer stays within a word budget."
    Params = WordCountParams
    example: ClassVar[dict[str, Any]] = {"max_words": 50}
    #: This evaluator never reads trace.scenario: the pipeline may use its fast decoder.
    reads_scenario: ClassVar[bool] = False

    def score(self, trace: Trace) -> Result:
        out = trace.final_output
        words = len(out.split()) if isinstance(out, str) else 0
        ok = words <= self.params.max_words
        return Result(self.key, 1.0 if ok else 0.0, words, f"{words} words, budget {self.params.max_words}")
