"""openevals' multi-turn simulation under assay.compat: a stand-in app, a simulated user that
speaks through assay's judge endpoint (the stand-in judge server over HTTP), trajectory
evaluators that score the conversation, and the conversation scored again by ``assay run``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.compat.openevals.simulators import (
    create_async_llm_simulated_user,
    create_llm_simulated_user,
    run_multiturn_simulation,
    run_multiturn_simulation_async,
    simulation_trace,
)
from assay.compat.openevals.trajectory.llm import create_trajectory_llm_as_judge
from assay.compat.openevals.trajectory.match import create_trajectory_match_evaluator
from assay.testing.judge_server import JudgeServerThread, default_verdict, prompt_text, requested_schema


class Users:
    """The stand-in's rule: free-text requests (the simulated user) get a user line naming the turn;
    schema requests (judges) get the deterministic verdict."""

    def __init__(self) -> None:
        self.user_requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        schema = requested_schema(body, "openai")
        if schema is None:
            self.user_requests.append(body)
            return f"simulated user line {len(self.user_requests)}"
        return default_verdict(prompt_text(body), schema)


@pytest.fixture(scope="module")
def users() -> Users:
    return Users()


@pytest.fixture(scope="module")
def server(users: Users) -> Iterator[JudgeServerThread]:
    with JudgeServerThread(rule=users) as srv:
        yield srv


@pytest.fixture
def env(server: JudgeServerThread, monkeypatch: pytest.MonkeyPatch) -> JudgeServerThread:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stand-in")
    return server


def support_app(message: dict[str, Any], *, thread_id: str) -> dict[str, Any]:
    """A stand-in app: looks the order up with a tool when asked about one, then answers."""
    text = message["content"]
    if "order" in text:
        call = {"id": f"call-{thread_id}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        return {
            "messages": [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": "shipped"},
                {"role": "assistant", "content": "Your order has shipped."},
            ]
        }
    return {"role": "assistant", "content": f"You said: {text}"}


def test_static_user_runs_the_requested_turns_and_the_evaluators_score_it(env: JudgeServerThread) -> None:
    before = env.stats.ok
    result = run_multiturn_simulation(
        app=support_app,
        user=["Where is my order?", "Thanks!", "Bye"],
        max_turns=3,
        trajectory_evaluators=[
            create_trajectory_llm_as_judge(model="openai:gpt-4o-mini"),
            create_trajectory_match_evaluator(trajectory_match_mode="superset"),
        ],
        reference_outputs=[
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lookup", "arguments": "{}"}}]},
        ],
        thread_id="t-1",
    )
    roles = [m["role"] for m in result["trajectory"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]
    assert all(m["id"] for m in result["trajectory"])
    keys = [r["key"] for r in result["evaluator_results"]]
    assert keys == ["trajectory_accuracy", "trajectory_superset_match"]
    assert result["evaluator_results"][1]["score"] is True
    assert env.stats.ok == before + 1  # the LLM judge's one call


def test_llm_user_speaks_through_the_judge_endpoint_and_stops_on_condition(
    env: JudgeServerThread, users: Users
) -> None:
    user = create_llm_simulated_user(
        system="You are an impatient customer.", model="openai:gpt-4o-mini", fixed_responses=["Where is my order?"]
    )
    result = run_multiturn_simulation(
        app=support_app,
        user=user,
        max_turns=10,
        stopping_condition=lambda trajectory, turn_counter: turn_counter >= 3,
    )
    said = [m["content"] for m in result["trajectory"] if m["role"] == "user"]
    assert said[0] == "Where is my order?" and len(said) == 3
    assert said[1].startswith("simulated user line")
    # the model saw the conversation from the user's side: its own lines as assistant, the app's as user
    last = users.user_requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You are an impatient customer."}
    assert [m["role"] for m in last[1:]] == ["assistant", "user", "assistant", "user"]


def test_async_simulation_with_an_async_app_and_user(env: JudgeServerThread) -> None:
    async def app(message: dict[str, Any], *, thread_id: str) -> dict[str, Any]:
        return {"role": "assistant", "content": "ok " + message["content"]}

    user = create_async_llm_simulated_user(system="Ask one short question.", model="openai:gpt-4o-mini")

    async def main() -> Any:
        direct = await user([], turn_counter=0)  # awaited as openevals' async user is
        assert direct["role"] == "user"
        return await run_multiturn_simulation_async(app=app, user=user, max_turns=2)

    result = anyio.run(main)
    assert [m["role"] for m in result["trajectory"]] == ["user", "assistant", "user", "assistant"]


def test_a_simulation_needs_a_bound_and_enough_static_turns() -> None:
    with pytest.raises(ValueError, match="max_turns or stopping_condition"):
        run_multiturn_simulation(app=support_app, user=["hi"])
    with pytest.raises(ValueError, match="static responses"):
        run_multiturn_simulation(app=support_app, user=["hi"], max_turns=2)
    with pytest.raises(ValueError, match="Only one of model or client"):
        create_llm_simulated_user(system="x", model="openai:m", client=object())


def test_simulated_conversations_are_scored_by_assay_run(env: JudgeServerThread, tmp_path: Path) -> None:
    traces = tmp_path / "simulations.jsonl"
    with traces.open("w") as f:
        for i in range(3):
            result = run_multiturn_simulation(app=support_app, user=["Where is my order?", "Bye"], max_turns=2)
            f.write(json.dumps(simulation_trace(result, trace_id=f"sim-{i}")) + "\n")
    run = tmp_path / "run.yaml"
    run.write_text(
        f"source: {{path: {traces}}}\nsink: {{path: {tmp_path / 'out'}/}}\nevaluators:\n  - name: tool_call_accuracy\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", "from assay.cli import main; main()", "run", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for p in sorted((tmp_path / "out").glob("part-*")) for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in rows) == ["sim-0", "sim-1", "sim-2"]
    assert (tmp_path / "out" / "_SUCCESS").exists()
