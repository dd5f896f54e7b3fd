"""An LLM that plays the user: openevals' ``create_llm_simulated_user``, speaking through assay's
judge endpoints (``model="openai:…"``, a judge name or endpoint dict as ``judge``) or a LangChain
chat model (``client``)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio

from assay.compat.langchain import LangChainJudge
from assay.compat.openevals.simulators.multiturn import Message, as_message
from assay.evaluators.judge_base import find_judge
from assay.judges.base import Judge, JudgeRequest

OPENING = "Generate an initial query to start a conversation based on your instructions."


def _is_internal_message(message: Message) -> bool:
    """A message the simulated user does not see: anything but a user message or an assistant's
    plain answer (tool calls, tool results, system messages)."""
    return bool(message.get("role") != "user" and (message.get("role") != "assistant" or message.get("tool_calls")))


def user_view(trajectory: list[Message]) -> list[dict[str, Any]]:
    """The conversation from the simulated user's side: the app's plain answers are what it is
    told (``user``), its own messages are what it said (``assistant``); tool traffic is dropped."""
    view: list[dict[str, Any]] = []
    for m in trajectory:
        role = m.get("role")
        if role == "user":
            view.append({"role": "assistant", "content": m.get("content") or ""})
        elif role == "assistant" and not m.get("tool_calls"):
            view.append({"role": "user", "content": m.get("content") or ""})
    return view or [{"role": "user", "content": OPENING}]


class SimulatedUser:
    """A callable simulated user: ``fixed_responses`` first, then the model's replies.

    Call it as openevals does, ``user(trajectory, turn_counter=n)`` (sync), or ``await
    user.acall(...)``; :func:`~assay.compat.openevals.simulators.run_multiturn_simulation` uses
    the async path on its own loop.
    """

    def __init__(self, system: str, judge: Judge, fixed_responses: list[Any] | None) -> None:
        self.system = system
        self.judge = judge
        self.fixed_responses = list(fixed_responses or [])

    async def acall(self, trajectory: list[Message], *, turn_counter: int, **_: Any) -> Message:
        if turn_counter < len(self.fixed_responses):
            return as_message(self.fixed_responses[turn_counter])
        messages = [{"role": "system", "content": self.system}, *user_view(trajectory)]
        response = await self.judge.complete(JudgeRequest(messages=messages, metadata={"evaluator": "simulated_user"}))
        return {"role": "user", "content": response.text, "id": str(uuid.uuid4())}

    def __call__(self, trajectory: list[Message], *, turn_counter: int, **kwargs: Any) -> Message:
        return anyio.run(lambda: self.acall(trajectory, turn_counter=turn_counter, **kwargs))


class AsyncSimulatedUser(SimulatedUser):
    """The same simulated user, awaited when called: ``await user(trajectory, turn_counter=n)``."""

    async def __call__(self, trajectory: list[Message], *, turn_counter: int, **kwargs: Any) -> Message:  # type: ignore[override]
        return await self.acall(trajectory, turn_counter=turn_counter, **kwargs)


def _simulated_user(
    cls: type[SimulatedUser],
    system: str,
    model: str | None,
    client: Any,
    judge: Any,
    fixed_responses: list[Any] | None,
) -> SimulatedUser:
    given = [name for name, v in (("model", model), ("client", client), ("judge", judge)) if v]
    if not given:
        raise ValueError("Either model or client must be provided")
    if len(given) > 1:
        raise ValueError(f"Only one of model or client must be provided (got {', '.join(given)})")
    if client is not None:
        endpoint: Judge = LangChainJudge(client)
    else:
        endpoint = find_judge(judge, "simulated_user", model if model is None or ":" in model else f"openai:{model}")
    return cls(system, endpoint, fixed_responses)


def create_llm_simulated_user(
    *,
    system: str,
    model: str | None = None,
    client: Any = None,
    fixed_responses: list[Any] | None = None,
    judge: Any = None,
) -> SimulatedUser:
    """A simulated user played by an LLM with the ``system`` prompt (exactly one of ``model``,
    ``client`` — a LangChain chat model — or ``judge`` — an assay judge name, endpoint dict or
    Judge). ``fixed_responses[n]`` is said at turn ``n`` before the model takes over."""
    return _simulated_user(SimulatedUser, system, model, client, judge, fixed_responses)


def create_async_llm_simulated_user(
    *,
    system: str,
    model: str | None = None,
    client: Any = None,
    fixed_responses: list[Any] | None = None,
    judge: Any = None,
) -> SimulatedUser:
    """:func:`create_llm_simulated_user` whose calls are awaited (for ``run_multiturn_simulation_async``)."""
    return _simulated_user(AsyncSimulatedUser, system, model, client, judge, fixed_responses)


__all__ = [
    "AsyncSimulatedUser",
    "SimulatedUser",
    "_is_internal_message",
    "create_async_llm_simulated_user",
    "create_llm_simulated_user",
    "user_view",
]
