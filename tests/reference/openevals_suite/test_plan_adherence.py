# assay: vendored from openevals-0.2.2.tar.gz tests/test_plan_adherence.py (MIT, tests/reference/LICENSE.openevals); only the import lines are rewritten (tests/reference/vendor.py).
import pytest

from assay.compat.openevals.llm import create_llm_as_judge
from assay.compat.openevals.prompts.quality.plan_adherence import PLAN_ADHERENCE_PROMPT


@pytest.mark.langsmith
def test_llm_as_judge_plan_adherence():
    inputs = {
        "question": "What is a doodad?",
    }
    plan = {
        "steps": ["Research the definition of a doodad", "Provide a concise answer"]
    }
    outputs = {
        "steps": [
            "I've done my research on Google and have concluded that a doodad is a thingy."
        ],
        "answer": "A doodad is a thingy.",
    }
    llm_as_judge = create_llm_as_judge(
        prompt=PLAN_ADHERENCE_PROMPT,
        feedback_key="plan_adherence",
        model="openai:gpt-6.1-sol",
    )
    eval_result = llm_as_judge(inputs=inputs, outputs=outputs, plan=plan)
    assert eval_result["score"]


@pytest.mark.langsmith
def test_llm_as_judge_plan_adherence_not_concise():
    inputs = {
        "question": "What is a doodad?",
    }
    plan = {
        "steps": ["Research the definition of a doodad", "Provide a concise answer"]
    }
    outputs = {"answer": "A doodad is a thingy."}
    llm_as_judge = create_llm_as_judge(
        prompt=PLAN_ADHERENCE_PROMPT,
        feedback_key="plan_adherence",
        model="openai:gpt-6.1-sol",
    )
    eval_result = llm_as_judge(inputs=inputs, outputs=outputs, plan=plan)
    assert not eval_result["score"]
