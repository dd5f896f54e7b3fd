"""Three ways to bring your own evaluator to assay. Run: ``python examples/custom_evaluator.py``.

1. A plain function, named ``"module:function"`` in a run file (evaluator ``python``):

       evaluators:
         - name: python
           params: {function: "examples.custom_evaluator:no_apologies"}

2. A class: subclass ``Evaluator`` (one result) / ``MultiEvaluator`` / ``AsyncEvaluator`` with a
   pydantic ``Params`` model, and register it in code with ``register_evaluator`` ...
3. ... or ship it in a package with an ``assay.evaluators`` entry point (see examples/plugin/).
"""

from __future__ import annotations

from typing import Any, ClassVar

from assay import build_evaluator, register_evaluator
from assay.evaluators import Evaluator, EvaluatorParams, PythonEvaluator
from assay.records import Result
from assay.traces.model import Trace

# -- 1. functions ------------------------------------------------------------------------------


def no_apologies(outputs: Any) -> dict[str, Any]:
    """Pass when the final answer does not apologise (openevals-style dict result)."""
    text = outputs if isinstance(outputs, str) else str(outputs)
    sorry = any(w in text.lower() for w in ("sorry", "apologi"))
    return {"score": not sorry, "comment": "apologised" if sorry else "no apology"}


async def answer_checks(outputs: Any, reference_outputs: Any, trace: Trace) -> dict[str, Any]:
    """An async function returning several results at once (key -> score)."""
    answer = trace.final_output or ""
    return {
        "answer_present": bool(answer),
        "mentions_reference": str(reference_outputs).lower() in str(answer).lower(),
        "tool_calls_used": min(1.0, len(trace.tool_calls()) / 3),
    }


# -- 2. a class --------------------------------------------------------------------------------


class PolitenessParams(EvaluatorParams):
    words: list[str] = ["please", "thank"]
    """Words that count as polite."""


class Politeness(Evaluator[PolitenessParams]):
    """Fraction of the polite words that the final answer uses."""

    name: ClassVar[str] = "politeness"
    description: ClassVar[str] = "Fraction of polite words the final answer uses."
    Params = PolitenessParams
    example: ClassVar[dict[str, Any]] = {"words": ["please", "thank"]}

    def score(self, trace: Trace) -> Result:
        text = str(trace.final_output or "").lower()
        hits = [w for w in self.params.words if w in text]
        return Result(self.key, len(hits) / len(self.params.words), len(hits), f"polite words: {hits}")


def main() -> None:
    trajectory = [
        {"role": "user", "content": "Where is my order?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Thank you for waiting: your order has shipped."},
    ]

    ev = PythonEvaluator(function=no_apologies)
    print(ev.evaluate(outputs="Sorry, I cannot help.")[0])

    multi = PythonEvaluator(function=answer_checks)
    for r in multi.evaluate(outputs=trajectory, reference_outputs="shipped"):
        print(r.key, r.score)

    register_evaluator("politeness", Politeness)
    print(build_evaluator("politeness", {"words": ["thank", "please"]}).evaluate(outputs=trajectory))


if __name__ == "__main__":
    main()
