"""Live differential test: assay vs openevals on freshly generated full-size agent traces.

Runs only where openevals is importable (never a dependency of assay), e.g.

    /tmp/refvenv/bin/pip install -e . pytest pytest-timeout
    /tmp/refvenv/bin/python -m pytest tests/conformance/test_trajectory_live.py -m reference

Traces come from ``benchmarks/gen_corpus.py`` with a seed the golden file does not use, in both
record shapes. Field-path configurations are checked against assay's documented rule run on
openevals' machinery (see ``generate_trajectory_golden.py``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_module

pytest.importorskip("openevals")
pytest.importorskip("agentevals")
pytest.importorskip("potato.evaluators")

pytestmark = pytest.mark.reference

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
N = 150


golden_gen = load_module(HERE / "generate_trajectory_golden.py", "generate_trajectory_golden")
gen_corpus = load_module(ROOT / "benchmarks" / "gen_corpus.py", "gen_corpus")
golden_test = load_module(HERE / "test_trajectory_golden.py", "test_trajectory_golden_helpers")

CONFIGS = golden_gen.BASE_CONFIGS + golden_gen.CORPUS_OVERRIDE_CONFIGS


@pytest.fixture(scope="module")
def refs() -> Any:
    return golden_gen.References()


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    out = []
    for i in range(N):
        shape = "flat" if i % 2 else "nested"
        rec = gen_corpus.make_record(4242, i, shape)
        if shape == "flat":
            outputs, reference = rec["messages"], rec["reference_outputs"]
        else:
            outputs, reference = rec["outputs"], rec["reference_outputs"]
        out.append(
            {
                "id": rec["id"],
                "variant": rec["metadata"]["variant"],
                "outputs": outputs,
                "reference": reference,
            }
        )
    return out


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c["id"] for c in CONFIGS])
def test_assay_agrees_with_openevals(cfg: dict[str, Any], refs: Any, cases: list[dict[str, Any]]) -> None:
    ev = golden_test.build(cfg)
    lib = "D" if golden_gen.has_paths(cfg) else "O"
    wrong = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            want = refs.run(lib, cfg, case["outputs"], case["reference"])
            got = golden_test.run(ev, case)
            if got != want:
                wrong.append(f"{case['id']} ({case['variant']}): assay {got}, {lib} {want}")
    assert not wrong, f"{len(wrong)} of {len(cases)} disagree: " + "; ".join(wrong[:8])


@pytest.mark.parametrize("args", golden_gen.ARGS)
def test_strict_tool_calls_scope_agrees_with_potato(args: str, refs: Any, cases: list[dict[str, Any]]) -> None:
    cfg = {"id": f"strict/{args}", "mode": "strict", "args": args, "overrides": None}
    ev = golden_test.build(cfg, scope="tool_calls")
    wrong = []
    for case in cases:
        want = refs.run("P", cfg, case["outputs"], case["reference"])
        got = golden_test.run(ev, case)
        if got != want:
            wrong.append(f"{case['id']} ({case['variant']}): assay {got}, potato {want}")
    assert not wrong, f"{len(wrong)} of {len(cases)} disagree: " + "; ".join(wrong[:8])


def test_langchain_message_objects_agree_with_openevals(refs: Any, cases: list[dict[str, Any]]) -> None:
    messages = pytest.importorskip("langchain_core.messages")
    wrong = []
    for case in cases[:40]:
        outputs = case["outputs"]["messages"] if isinstance(case["outputs"], dict) else case["outputs"]
        lc_outputs = messages.convert_to_messages(outputs)
        for cfg in golden_gen.BASE_CONFIGS:
            want = refs.run("O", cfg, outputs, case["reference"])
            ev = golden_test.build(cfg)
            got = golden_test.run(ev, {"outputs": lc_outputs, "reference": case["reference"]})
            if got != want:
                wrong.append(f"{case['id']} {cfg['id']}: assay {got}, openevals {want}")
    assert not wrong, f"{len(wrong)} disagree: " + "; ".join(wrong[:8])
