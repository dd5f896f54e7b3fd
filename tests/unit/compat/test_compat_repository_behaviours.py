"""Behaviours that openevals' and agentevals' repository-only tests check (their ``code/`` and
``trajectory/`` folders are not in the sdists tests/reference runs), through the compat paths and
with our own inputs: markdown code extraction, the pyright / mypy evaluators with an extraction
strategy (real checkers, sync and async), and trajectory match's tool-argument modes through
``openevals.trajectory.match``. The judge-backed ones (trajectory and graph trajectory judges) are
in tests/integration/compat/test_compat_verdicts.py."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
from typing import Any

import anyio
import pytest

FENCE = "```"
#: prose, then blocks a reply might hold: shell and JSON blocks are not code to check
REPLY = (
    f'Install:\n{FENCE}bash\npip install x\n{FENCE}\nConfig:\n{FENCE}json\n{{"a": 1}}\n{FENCE}\n'
    f"Code:\n{FENCE}python\nimport os\n\nprint(os.sep)\n{FENCE}\nthen\n{FENCE}\nx = 1\n{FENCE}\n"
    f"Inline {FENCE} fences {FENCE}python are not blocks.\n"
)


def test_markdown_extraction_keeps_code_blocks_in_order_and_drops_shell_and_json() -> None:
    from assay.compat.openevals.code.base import _extract_code_from_markdown_code_blocks as extract

    # each block's text, joined by a newline (openevals 0.2.2 gives this string for this reply)
    assert extract(REPLY) == "import os\n\nprint(os.sep)\n\nx = 1\n"
    assert extract(f"{FENCE}sh\nls\n{FENCE}\n") is None
    assert extract("no code here") is None


#: (checker, outputs, strategy, verdict): prose is not code; a wrong name from a real module and a
#: syntax error fail; the python and unlabelled blocks of a reply are checked together. The cases are
#: shared out between the two checkers (each call starts a checker process: 1-4 s).
CASES = [
    ("pyright", "Sure! Here is a function: def add(a, b): return a + b", "none", False),
    (
        "pyright",
        f"First:\n{FENCE}python\nimport os\n{FENCE}\nThen:\n{FENCE}\nprint(os.sep)\n{FENCE}\n",
        "markdown_code_blocks",
        True,
    ),
    ("mypy", "from os import no_such_name\n\nprint(no_such_name)\n", "none", False),
    ("mypy", "def add(a: int, b: int) -> int:\n    return a + b\n", "none", True),
    ("mypy", "def f() -> None:\n    nonlocal nonlocal\n", "none", False),
    (
        "mypy",
        f"Here:\n{FENCE}python\ndef f() -> None:\n    nonlocal nonlocal\n{FENCE}\n",
        "markdown_code_blocks",
        False,
    ),
    ("mypy", "from os import no_such_name\n", "all", False),  # an unknown strategy is "none", as in openevals
]


def _checker(name: str) -> tuple[Any, Any]:
    if name == "pyright":
        if shutil.which("pyright") is None:
            pytest.skip("pyright CLI not installed")
        from assay.compat.openevals.code.pyright import create_async_pyright_evaluator, create_pyright_evaluator

        return create_pyright_evaluator, create_async_pyright_evaluator
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy not installed")
    from assay.compat.openevals.code.mypy import create_async_mypy_evaluator, create_mypy_evaluator

    return create_mypy_evaluator, create_async_mypy_evaluator


@pytest.mark.parametrize("checker", ["pyright", "mypy"])
def test_type_checker_evaluators_with_an_extraction_strategy(checker: str) -> None:
    sync_factory, async_factory = _checker(checker)
    cases = [case for case in CASES if case[0] == checker]
    got = []
    for _, outputs, strategy, _ in cases[:-1]:
        result = sync_factory(code_extraction_strategy=strategy)(outputs=outputs)
        assert result["key"] == f"{checker}_succeeded"
        got.append(result["score"])

    async def main() -> Any:  # the last case through the async factory
        return await async_factory(code_extraction_strategy=cases[-1][2])(outputs=cases[-1][1])

    got.append(anyio.run(main)["score"])
    assert got == [verdict for *_, verdict in cases]


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": name, "arguments": json.dumps(args)}}],
    }


@pytest.mark.parametrize("face", ["openevals", "agentevals"])
@pytest.mark.parametrize(
    ("args_mode", "strict_score", "extra_key_score"),
    [("exact", False, False), ("ignore", True, True), ("subset", False, False), ("superset", False, True)],
)
def test_tool_argument_modes_of_trajectory_match(
    face: str, args_mode: str, strict_score: bool, extra_key_score: bool
) -> None:
    create = importlib.import_module(f"assay.compat.{face}.trajectory.match").create_trajectory_match_evaluator
    ask = {"role": "user", "content": "weather?"}
    # other argument values (strict mode): only "ignore" matches
    ev = create(trajectory_match_mode="strict", tool_args_match_mode=args_mode)
    result = ev(outputs=[ask, _call("get_weather", {"city": "SF"})],
                reference_outputs=[ask, _call("get_weather", {"city": "San Francisco"})])  # fmt: skip
    assert (result["key"], result["score"]) == ("trajectory_strict_match", strict_score)
    # the output's arguments a superset of the reference's: "ignore" and "superset" match
    ev = create(tool_args_match_mode=args_mode)
    result = ev(outputs=[ask, _call("get_flight", {"flight_no": "LX0112", "is_cool": True})],
                reference_outputs=[ask, _call("get_flight", {"flight_no": "LX0112"})])  # fmt: skip
    assert result == {"key": "trajectory_strict_match", "score": extra_key_score, "comment": None, "metadata": None}
