# assay: vendored from openevals-0.2.2.tar.gz tests/test_answer_relevance.py (MIT, tests/reference/LICENSE.openevals); only the import lines are rewritten (tests/reference/vendor.py).
import pytest

from assay.compat.openevals.llm import create_llm_as_judge
from assay.compat.openevals.prompts.quality.answer_relevance import ANSWER_RELEVANCE_PROMPT


@pytest.mark.langsmith
def test_llm_as_judge_answer_relevance():
    inputs = {
        "question": "What is a doodad?",
    }
    outputs = {"answer": "A doodad is a thingy."}
    llm_as_judge = create_llm_as_judge(
        prompt=ANSWER_RELEVANCE_PROMPT,
        feedback_key="answer_relevance",
        model="openai:gpt-6-luna",
    )
    eval_result = llm_as_judge(inputs=inputs, outputs=outputs)
    assert eval_result["score"]


@pytest.mark.langsmith
def test_llm_as_judge_answer_relevance_not_concise():
    inputs = {
        "question": "What is a doodad?",
    }
    outputs = {
        "answer": "According to all known laws of aviation, there is no way a bee should be able to fly."
    }
    llm_as_judge = create_llm_as_judge(
        prompt=ANSWER_RELEVANCE_PROMPT,
        feedback_key="answer_relevance",
        model="openai:gpt-6-luna",
    )
    eval_result = llm_as_judge(inputs=inputs, outputs=outputs)
    assert not eval_result["score"]
