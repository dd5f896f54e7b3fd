"""``from openevals.types import …`` (see :mod:`assay.compat`): the same names and shapes as
openevals' types module, so annotations and ``EvaluatorResult(key=…, score=…, …)`` comparisons
keep working.

>>> EvaluatorResult(key="k", score=True, comment=None, metadata=None)
{'key': 'k', 'score': True, 'comment': None, 'metadata': None}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, Union, runtime_checkable

from typing_extensions import TypedDict

if TYPE_CHECKING:  # langchain-core is optional: only the ``Messages`` alias names its classes
    from langchain_core.messages import BaseMessage, BaseMessageChunk

ScoreType = Union[float, bool]  # noqa: UP007 (a runtime alias, as in openevals)


class EvaluatorResult(TypedDict):
    """One result of an evaluator function (``source_run_id`` only where LangSmith sets it)."""

    key: str
    score: ScoreType
    comment: str | None
    metadata: dict[str, Any] | None
    source_run_id: NotRequired[str | None]


class SimpleEvaluator(Protocol):
    """A sync evaluator function: ``evaluator(inputs=, outputs=, reference_outputs=, **kwargs)``."""

    def __call__(
        self,
        *,
        inputs: Any | None = None,
        outputs: Any,
        reference_outputs: Any | None = None,
        **kwargs: Any,
    ) -> EvaluatorResult | list[EvaluatorResult]: ...


class SimpleAsyncEvaluator(Protocol):
    """An async evaluator function (``await evaluator(outputs=...)``)."""

    async def __call__(
        self,
        *,
        inputs: Any | None = None,
        outputs: Any,
        reference_outputs: Any | None = None,
        **kwargs: Any,
    ) -> EvaluatorResult | list[EvaluatorResult]: ...


class ChatCompletionMessage(TypedDict):
    """An OpenAI-style chat message."""

    id: NotRequired[str | None]
    content: str | list[dict[str, Any]]
    role: str
    tool_calls: NotRequired[list[dict[str, Any]] | None]


class ChatCompletion(TypedDict):
    """An OpenAI chat completion (its choices)."""

    choices: list[dict[str, Any]]


class FewShotExample(TypedDict):
    """A few-shot example appended to a judge prompt."""

    inputs: Any
    outputs: Any
    score: float | bool
    reasoning: str | None


if TYPE_CHECKING:
    Messages = Union[ChatCompletionMessage, BaseMessage, BaseMessageChunk]  # noqa: UP007
else:
    Messages = Union[ChatCompletionMessage, Any]  # noqa: UP007


@runtime_checkable
class ChatCompletionsClient(Protocol):
    """``client.chat.completions`` of an OpenAI-style SDK."""

    def create(self, **kwargs: Any) -> ChatCompletion: ...


@runtime_checkable
class ModelClient(Protocol):
    """An OpenAI-style SDK client (has ``.chat``)."""

    @property
    def chat(self) -> type[ChatCompletionsClient]: ...


@runtime_checkable
class RunnableLike(Protocol):
    """Anything with ``invoke``/``ainvoke`` (a LangChain runnable)."""

    def invoke(self, inputs: Any, **kwargs: Any) -> Any: ...

    async def ainvoke(self, inputs: Any, **kwargs: Any) -> Any: ...


class MultiturnSimulationResult(TypedDict):
    """What ``run_multiturn_simulation`` returns."""

    evaluator_results: list[EvaluatorResult]
    trajectory: list[ChatCompletionMessage]


ToolArgsMatchMode = Literal["exact", "ignore", "subset", "superset"]

#: The trajectory match modes (a wrong ``trajectory_match_mode=`` is a static type error).
TrajectoryMatchMode = Literal["strict", "unordered", "subset", "superset"]

ToolArgsMatchOverrides = dict[
    str, Union[ToolArgsMatchMode, list[str], Callable[[dict[str, Any], dict[str, Any]], bool]]  # noqa: UP007
]

__all__ = [
    "ChatCompletion",
    "ChatCompletionMessage",
    "ChatCompletionsClient",
    "EvaluatorResult",
    "FewShotExample",
    "Messages",
    "ModelClient",
    "MultiturnSimulationResult",
    "RunnableLike",
    "ScoreType",
    "SimpleAsyncEvaluator",
    "SimpleEvaluator",
    "ToolArgsMatchMode",
    "ToolArgsMatchOverrides",
    "TrajectoryMatchMode",
]
