"""openevals' ``create_llm_as_judge`` / ``create_async_llm_as_judge`` over assay's LLM judge.

Change only the import line of openevals code::

    from assay.compat.openevals.llm import create_llm_as_judge
    from assay.compat.openevals.prompts import CORRECTNESS_PROMPT

    evaluator = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, model="openai:o3-mini")
    evaluator(inputs="...", outputs="...", reference_outputs="...")
    # {'key': 'score', 'score': True, 'comment': '...', 'metadata': {...}}

The call goes through assay's judge endpoint (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` honoured),
with its retries and limits. ``evaluator.evaluator`` is the assay :class:`~assay.evaluators.LLMJudge`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast, overload

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, llm_judge_evaluator
from assay.compat.langchain import _stringify, is_chat_model, prompt_messages
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.compat.openevals.utils import _attachment_to_content_block
from assay.evaluators.judge_render import append_to_last_user
from assay.evaluators.llm_judge import LLMJudge
from assay.judges.verdict import ScoreKind, VerdictSpec


def init_chat_model(model: str, **kwargs: Any) -> Any:
    """A LangChain chat model for ``"provider:model"`` (``openai:`` → ``ChatOpenAI``,
    ``anthropic:`` → ``ChatAnthropic``; other providers through ``langchain``'s own
    ``init_chat_model`` when it is installed)."""
    provider, _, name = model.partition(":")
    if not name:
        provider, name = ("anthropic" if model.startswith("claude") else "openai"), model
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=name, **kwargs)
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model_name=name, **kwargs)
    try:
        from langchain.chat_models import init_chat_model as langchain_init  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ValueError(f"model {model!r}: install langchain to use provider {provider!r}") from exc
    return langchain_init(model=model, **kwargs)


def _verdict_schema(continuous: bool, choices: list[float] | None, use_reasoning: bool) -> dict[str, Any]:
    kind: ScoreKind = "choices" if choices else "continuous" if continuous else "boolean"
    spec = VerdictSpec(kind=kind, use_reasoning=use_reasoning, choices=tuple(choices or ()))
    return {"title": "score", "additionalProperties": False, **spec.schema()}


def _scorer_messages(prompt: Any, system: str | None, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The judge messages of one call, as openevals builds them (attachments as content blocks)."""
    attachments = args.pop("attachments", None)
    values = {k: _stringify(v) for k, v in args.items() if v is not None}
    if not isinstance(prompt, str):
        messages = prompt_messages(prompt, {**args, **({"attachments": attachments} if attachments else {})})
    elif attachments is None:
        messages = [{"role": "user", "content": prompt.format(**values)}]
    else:
        before, _, after = prompt.partition("{attachments}")
        items = attachments if isinstance(attachments, list) else [attachments]
        content: list[dict[str, Any]] = []
        if text := before.format(**values):
            content.append({"type": "text", "text": text})
        content.extend(_attachment_to_content_block(item) for item in items)
        if after and (text := after.format(**values)):
            content.append({"type": "text", "text": text})
        messages = [{"role": "user", "content": content}]
    return [{"role": "system", "content": system}, *messages] if system is not None else messages


def _langchain_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Content blocks in LangChain's standard form (what its chat models translate per provider)."""
    from langchain_core.messages import HumanMessage

    out = []
    for m in messages:
        if isinstance(m.get("content"), list):
            blocks = HumanMessage(content=m["content"]).content_blocks
            m = {**m, "content": [b for b in blocks if isinstance(b, dict)]}
        out.append(m)
    return out


def _few_shot_text(examples: list[dict[str, Any]]) -> str:
    """openevals' rendering of few-shot examples, exactly (the scorer's messages are compared
    verbatim): ``<example>`` blocks, the score as Python prints it."""
    return "\n".join(
        f"<example>\n<input>{ex['inputs']}</input>\n<output>{ex['outputs']}</output>"
        + (f"\n<reasoning>{ex['reasoning']}</reasoning>" if "reasoning" in ex else "")
        + (f"\n<score>{ex['score']}</score>" if "score" in ex else "")
        + "\n</example>"
        for ex in examples
    )


def _create_llm_as_judge_scorer(
    *,
    prompt: Any,
    system: str | None = None,
    schema: Any = None,
    judge: Any = None,
    model: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """openevals' low-level scorer: ``scorer(inputs=, outputs=, reference_outputs=, **kwargs)``
    calls the judge directly (a LangChain chat model, one made from ``model`` by
    :func:`init_chat_model`, or an OpenAI SDK client) and returns ``(score, reasoning)`` (just the
    score without reasoning; the parsed object with ``schema``). No retries, limits or cache: use
    :func:`create_llm_as_judge` for those."""

    def get_score(*, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any) -> Any:
        if system is not None and not isinstance(prompt, str):
            raise ValueError("`system` is only supported when `prompt` is a string template")
        args = {"inputs": inputs, "outputs": outputs, "reference_outputs": reference_outputs, **kwargs}
        messages = _scorer_messages(prompt, system, args)
        if few_shot_examples:
            append_to_last_user(messages, _few_shot_text(few_shot_examples))
        verdict_schema = _verdict_schema(continuous, choices, use_reasoning)
        client = judge
        if client is None:
            if model is None:
                raise ValueError("a `model` string is required (e.g. 'openai:gpt-4o-mini')")
            client = init_chat_model(model=model)
        if is_chat_model(client) or hasattr(client, "with_structured_output"):
            runnable = client.with_structured_output(
                schema if schema is not None else verdict_schema, **(structured_output_kwargs or {})
            )
            response = runnable.invoke(_langchain_blocks(messages))
        elif hasattr(client, "chat"):
            if model is None:
                raise ValueError("a `model` string is required (e.g. 'openai:gpt-4o-mini')")
            json_schema = schema if isinstance(schema, dict) else verdict_schema
            if schema is not None and not isinstance(schema, dict):
                raise ValueError("`schema` must be a JSON schema when using an OpenAI client directly")
            body = {k: v for k, v in json_schema.items() if k != "title"}
            reply = client.chat.completions.create(
                messages=messages,
                model=model.partition(":")[2] if model.startswith("openai:") else model,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "score", "strict": True, "schema": body},
                },
            )
            response = json.loads(reply.choices[0].message.content)
        else:
            raise ValueError("`judge` must be an OpenAI client or a LangChain chat model")
        if schema is not None:
            return response
        return (response["score"], response["reasoning"]) if use_reasoning else response["score"]

    return get_score


def _raw_object(output_schema: Any) -> bool | type:
    """What ``output_schema`` makes a call return: an instance of a pydantic class, else the dict."""
    if isinstance(output_schema, type) and hasattr(output_schema, "model_validate"):
        return output_schema
    return output_schema is not None


def _build(*, output_schema: Any, is_async: bool, **params: Any) -> Any:
    return llm_judge_evaluator(
        LLMJudge,
        output_schema=output_schema,
        raw_object=_raw_object(output_schema),
        is_async=is_async,
        strict_variables=True,  # openevals formats the template: a variable not given is a KeyError
        **params,
    )


@overload
def create_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: None = None,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> CompatEvaluator[TypedResult]: ...


@overload
def create_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> CompatEvaluator[Any]: ...


def create_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any = None,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> CompatEvaluator[Any]:
    """An LLM-as-judge evaluator function with openevals' arguments and results: a bool score
    (``continuous``: a number in [0, 1]; ``choices``: the chosen number), the reasoning as
    ``comment``; with ``output_schema`` (a JSON schema, TypedDict or pydantic model) the parsed
    object itself. Extra keyword arguments of a call fill extra template variables.
    ``structured_output_kwargs`` go to a LangChain ``judge``'s ``with_structured_output`` (e.g.
    ``{"method": "json_schema"}``); assay's own endpoints (``model="openai:…"``) ignore them."""
    return cast("CompatEvaluator[Any]", _build(**locals(), is_async=False))


@overload
def create_async_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: None = None,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> AsyncCompatEvaluator[TypedResult]: ...


@overload
def create_async_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> AsyncCompatEvaluator[Any]: ...


def create_async_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any = None,
    structured_output_kwargs: dict[str, Any] | None = None,
) -> AsyncCompatEvaluator[Any]:
    """:func:`create_llm_as_judge` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return cast("AsyncCompatEvaluator[Any]", _build(**locals(), is_async=True))


__all__ = [
    "_create_llm_as_judge_scorer",
    "create_async_llm_as_judge",
    "create_llm_as_judge",
    "init_chat_model",
]
