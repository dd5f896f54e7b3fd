"""The multi-turn loop: the user speaks, the app answers, until ``max_turns`` or the stopping
condition; then every trajectory evaluator scores the whole conversation.

One implementation (async); :func:`run_multiturn_simulation` runs it on its own event loop, so sync
apps, users and evaluators work unchanged, and :func:`run_multiturn_simulation_async` awaits it.

>>> result = run_multiturn_simulation(
...     app=lambda msg, **_: {"role": "assistant", "content": "echo: " + msg["content"]},
...     user=["hi", "bye"], max_turns=2, thread_id="t1")
>>> [m["content"] for m in result["trajectory"]]
['hi', 'echo: hi', 'bye', 'echo: bye']
"""

from __future__ import annotations

import functools
import inspect
import sys
import uuid
from collections.abc import Callable
from typing import Any, TypedDict

import anyio

Message = dict[str, Any]


class MultiturnSimulatorResult(TypedDict):
    """What a simulation returns (openevals' shape)."""

    trajectory: list[Message]
    evaluator_results: list[Any]


def as_message(value: Any) -> Message:
    """An OpenAI-style message dict with an ``id`` (LangChain messages and the OpenAI SDK's
    message objects converted)."""
    if isinstance(value, str):
        value = {"role": "user", "content": value}
    elif hasattr(value, "model_dump") and hasattr(value, "role"):  # an OpenAI SDK message object
        value = value.model_dump(exclude_none=True)
    elif not isinstance(value, dict):
        if not (hasattr(value, "type") and hasattr(value, "content")):
            raise ValueError(f"expected a message, got {type(value).__name__}: {value!r}")
        from langchain_core.messages import convert_to_openai_messages

        converted = convert_to_openai_messages(value)
        value = {**converted, "id": getattr(value, "id", None)}
    if value.get("id") is None:
        value = {**value, "id": str(uuid.uuid4())}
    return dict(value)


def as_messages(update: Any, source: str) -> list[Message]:
    """A message, a list of messages or ``{"messages": [...]}`` as a list of message dicts."""
    if isinstance(update, dict) and "messages" in update and "role" not in update:
        update = update["messages"]
    items = update if isinstance(update, list) else [update]
    try:
        return [as_message(m) for m in items]
    except ValueError as exc:
        raise ValueError(
            f"unexpected trajectory update from {source!r}: {update!r}; expected a message, a list of "
            "messages, or a dict with a 'messages' key"
        ) from exc


def merge(trajectory: list[Message], update: list[Message]) -> list[Message]:
    """Append the messages of ``update`` whose id is not in the trajectory yet."""
    seen = {m.get("id") for m in trajectory}
    out = list(trajectory)
    for m in update:
        if m.get("id") not in seen:
            seen.add(m.get("id"))
            out.append(m)
    return out


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await an async callable on this loop; run a sync one in a worker thread, where it may run an
    event loop of its own (a sync evaluator function does)."""
    acall = getattr(fn, "acall", None)  # assay's simulated user: its async path, on this loop
    if acall is not None:
        return await acall(*args, **kwargs)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return await fn(*args, **kwargs)
    result = await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
    if inspect.isawaitable(result):
        result = await result
    return result


def _static_user(responses: list[Any]) -> Callable[..., Message]:
    def next_turn(trajectory: list[Message], *, turn_counter: int, **_: Any) -> Message:
        if turn_counter >= len(responses):
            raise ValueError(
                f"turn {turn_counter + 1} needs a user message, but only {len(responses)} static responses "
                "were given: give more responses or fewer max_turns"
            )
        return as_message(responses[turn_counter])

    return next_turn


async def simulate(
    *,
    app: Callable[..., Any],
    user: Callable[..., Any] | list[Any],
    max_turns: int | None,
    trajectory_evaluators: list[Callable[..., Any]] | None,
    stopping_condition: Callable[..., Any] | None,
    reference_outputs: Any,
    thread_id: str | None,
) -> MultiturnSimulatorResult:
    """The simulation itself (see :func:`run_multiturn_simulation`)."""
    if max_turns is None and stopping_condition is None:
        raise ValueError("At least one of max_turns or stopping_condition must be provided.")
    thread = thread_id or str(uuid.uuid4())
    speaker = _static_user(user) if isinstance(user, list) else user
    trajectory: list[Message] = []
    turn = 0
    while max_turns is None or turn < max_turns:
        said = as_message(await _call(speaker, trajectory, thread_id=thread, turn_counter=turn))
        trajectory = merge(trajectory, [said])
        answer = await _call(app, said, thread_id=thread)  # the app gets the latest user message only
        turn += 1
        trajectory = merge(trajectory, as_messages(answer, "app"))
        if stopping_condition is not None and await _call(stopping_condition, trajectory, turn_counter=turn):
            break
    results: list[Any] = []
    for evaluator in trajectory_evaluators or []:
        try:
            outcome = await _call(evaluator, outputs=trajectory, reference_outputs=reference_outputs)
        except Exception as exc:  # openevals reports and goes on: one broken evaluator loses no others
            print(f"Error in trajectory evaluator {evaluator}: {exc}", file=sys.stderr)
            continue
        results.extend(outcome if isinstance(outcome, list) else [outcome])
    return MultiturnSimulatorResult(trajectory=trajectory, evaluator_results=results)


def run_multiturn_simulation(
    *,
    app: Callable[..., Any],
    user: Callable[..., Any] | list[Any],
    max_turns: int | None = None,
    trajectory_evaluators: list[Callable[..., Any]] | None = None,
    stopping_condition: Callable[..., Any] | None = None,
    reference_outputs: Any = None,
    thread_id: str | None = None,
) -> MultiturnSimulatorResult:
    """Simulate a conversation between ``app`` and ``user`` and score it.

    ``user`` is a callable ``(trajectory, *, thread_id, turn_counter) -> message`` (e.g.
    :func:`create_llm_simulated_user`) or a list of static user messages; ``app`` is called with the
    latest user message (and ``thread_id``) and returns a message, a list of messages or
    ``{"messages": [...]}``. Messages are merged into the trajectory by id. After ``max_turns`` (or
    when ``stopping_condition(trajectory, turn_counter=n)`` is true) each trajectory evaluator gets
    ``outputs=trajectory, reference_outputs=…``; a failing evaluator is reported and skipped.
    Returns ``{"trajectory": [...], "evaluator_results": [...]}``.
    """
    args = dict(locals())
    return anyio.run(lambda: simulate(**args))


async def run_multiturn_simulation_async(
    *,
    app: Callable[..., Any],
    user: Callable[..., Any] | list[Any],
    max_turns: int | None = None,
    trajectory_evaluators: list[Callable[..., Any]] | None = None,
    stopping_condition: Callable[..., Any] | None = None,
    reference_outputs: Any = None,
    thread_id: str | None = None,
) -> MultiturnSimulatorResult:
    """:func:`run_multiturn_simulation`, awaited (apps, users and evaluators may be async)."""
    return await simulate(**locals())


def simulation_trace(result: MultiturnSimulatorResult, *, trace_id: str, **fields: Any) -> dict[str, Any]:
    """A simulation as a trace record for ``assay run`` (one JSON line: ``id``, ``messages`` and any
    extra fields such as ``reference_outputs`` or ``metadata``), message ids dropped.

    >>> simulation_trace({"trajectory": [{"role": "user", "content": "hi", "id": "1"}],
    ...                   "evaluator_results": []}, trace_id="sim-1")
    {'id': 'sim-1', 'messages': [{'role': 'user', 'content': 'hi'}]}
    """
    messages = [{k: v for k, v in m.items() if k != "id"} for m in result["trajectory"]]
    return {"id": trace_id, "messages": messages, **fields}


__all__ = [
    "MultiturnSimulatorResult",
    "run_multiturn_simulation",
    "run_multiturn_simulation_async",
    "simulate",
    "simulation_trace",
]
