"""LangChain objects in the library face: a chat model as ``judge`` and a prompt template (or any
callable returning messages) as ``prompt``, as openevals accepts them.

A LangChain chat model is called through its own API (``with_structured_output(schema)``), as
openevals calls it, with its sync ``invoke`` in a worker thread, from sync and awaited evaluators
alike: a model's async HTTP client is cached per endpoint (``ChatOpenAI``'s, shared by every
instance) and bound to the event loop of its first call, so awaiting ``ainvoke`` from the next
call's loop (each sync call runs on a loop of its own; ``asyncio.run`` twice) failed with "Event
loop is closed". assay's rate limits, retries, cache and cost accounting do not apply to it
(they belong to assay's own endpoints, which run files use).

>>> is_chat_model(object())
False
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

import anyio
import orjson

from assay.evaluators.llm_judge import CompiledPrompt, LLMJudge
from assay.exceptions import ConfigError, JudgeError
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage
from assay.traces.model import Trace

#: The reserved call keyword carrying a call's raw arguments to a prompt function.
RAW_ARGS = "_assay_prompt_args"


async def _invoke(runnable: Any, messages: Any, callback: Any = None) -> Any:
    """``runnable.invoke(messages)`` in a worker thread: never the model's loop-bound async client."""
    if callback is None:
        return await anyio.to_thread.run_sync(runnable.invoke, messages)
    return await anyio.to_thread.run_sync(lambda: runnable.invoke(messages, config={"callbacks": [callback]}))


def _usage_counter() -> Any:
    """LangChain's usage callback (token counts of every model call under it)."""
    from langchain_core.callbacks import UsageMetadataCallbackHandler

    return UsageMetadataCallbackHandler()


def _counted(counter: Any) -> JudgeUsage:
    totals = list(getattr(counter, "usage_metadata", {}).values())
    return JudgeUsage(
        input_tokens=sum(int(u.get("input_tokens", 0) or 0) for u in totals),
        output_tokens=sum(int(u.get("output_tokens", 0) or 0) for u in totals),
        calls=1,
    )


def is_chat_model(obj: Any) -> bool:
    """A LangChain chat model (``BaseChatModel`` or anything with its calling surface)."""
    return hasattr(obj, "ainvoke") and hasattr(obj, "with_structured_output") and not hasattr(obj, "complete")


def is_prompt_function(obj: Any) -> bool:
    """A LangChain prompt (a ``Runnable``: ``ChatPromptTemplate`` …) or a plain callable."""
    return not isinstance(obj, str) and (hasattr(obj, "invoke") or callable(obj))


class LangChainJudge:
    """A LangChain chat model behind assay's :class:`~assay.judges.base.Judge` protocol.

    The verdict schema goes to ``with_structured_output`` (as a JSON schema with a ``title``, and
    ``structured_output_kwargs``, as openevals passes them); token usage is collected by LangChain's
    usage callback when the model reports it.
    """

    name: str

    def __init__(self, model: Any, structured_output_kwargs: dict[str, Any] | None = None) -> None:
        self.model = model
        self.structured_output_kwargs = dict(structured_output_kwargs or {})
        self.name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        started = time.monotonic()
        try:
            if request.schema is not None:
                schema = {"title": request.schema_name, **request.schema}
                runnable = self.model.with_structured_output(schema, **self.structured_output_kwargs)
                counter = _usage_counter()
                reply = await _invoke(runnable, request.messages, counter)
                if hasattr(reply, "model_dump"):
                    reply = reply.model_dump()
                if isinstance(reply, dict) and {"parsed", "raw"} <= reply.keys():  # include_raw=True given
                    reply = reply["parsed"]
                usage = _counted(counter)
                if not isinstance(reply, dict):
                    text = "" if reply is None else str(reply)
                    return JudgeResponse(text, None, usage, self.name, latency_s=time.monotonic() - started)
                return JudgeResponse(
                    orjson.dumps(reply, default=str).decode(),
                    reply,
                    usage,
                    self.name,
                    latency_s=time.monotonic() - started,
                )
            message = await _invoke(self.model, request.messages)
        except Exception as exc:  # the model's own errors, as data for the evaluator's error policy
            raise JudgeError(f"LangChain judge {self.name}: {type(exc).__name__}: {exc}") from exc
        text = message.content if isinstance(message.content, str) else orjson.dumps(message.content).decode()
        return JudgeResponse(text, None, _usage(message), self.name, latency_s=time.monotonic() - started)

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        chars = sum(len(str(m.get("content", ""))) for m in request.messages)
        return JudgeUsage(input_tokens=chars // 4, calls=1)


def _usage(message: Any) -> JudgeUsage:
    meta = getattr(message, "usage_metadata", None) or {}
    return JudgeUsage(
        input_tokens=int(meta.get("input_tokens", 0) or 0),
        output_tokens=int(meta.get("output_tokens", 0) or 0),
        calls=1,
    )


def _stringify(value: Any) -> Any:
    """openevals' stringification of ``inputs``/``outputs``/``reference_outputs`` for templates:
    a str stays; LangChain messages become OpenAI dicts; anything else is JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(_openai_shapes(value), default=str)  # json's spacing, as openevals sends it


def _openai_shapes(value: Any) -> Any:
    if hasattr(value, "type") and hasattr(value, "content") and not isinstance(value, dict):
        from langchain_core.messages import convert_to_openai_messages

        return convert_to_openai_messages(value)
    if isinstance(value, list):
        return [_openai_shapes(v) for v in value]
    if isinstance(value, dict):
        return {k: _openai_shapes(v) for k, v in value.items()}
    return value


def prompt_messages(prompt: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages a prompt function gives for one call, as OpenAI dicts.

    A LangChain ``Runnable`` is invoked with the stringified arguments (None values dropped); a
    plain callable gets the raw arguments and must return a list of messages.
    """
    if hasattr(prompt, "invoke"):
        params = {k: _stringify(v) for k, v in args.items() if v is not None}
        value = prompt.invoke(params)
        messages = value.to_messages() if hasattr(value, "to_messages") else value
    else:
        messages = prompt(**args)
    if not isinstance(messages, list):
        raise ConfigError(f"prompt: a prompt function must return a list of messages, got {type(messages).__name__}")
    return [m if isinstance(m, dict) else _openai_shapes(m) for m in messages]


class PromptFunctionJudge(LLMJudge):
    """:class:`~assay.evaluators.LLMJudge` whose messages come from a prompt function (library face only)."""

    name: ClassVar[str] = "llm_judge"

    def __init__(self, prompt_fn: Callable[..., Any] | Any, /, **params: Any) -> None:
        if params.get("system"):
            raise ConfigError("system: only allowed with a string prompt (put it in the prompt template)")
        self._prompt_fn = prompt_fn
        super().__init__(prompt="{outputs}", **params)

    def messages_for(self, trace: Trace, compiled: CompiledPrompt) -> list[dict[str, Any]]:
        args = (trace.scenario or {}).get(RAW_ARGS)
        if not isinstance(args, dict):
            raise ConfigError("a prompt function is only usable through assay.compat's evaluator call")
        messages = prompt_messages(self._prompt_fn, args)
        if self.params.few_shot_examples:
            from assay.evaluators.judge_render import append_to_last_user, few_shot_text

            append_to_last_user(messages, few_shot_text(self.params.few_shot_examples))
        return messages


__all__ = [
    "RAW_ARGS",
    "LangChainJudge",
    "PromptFunctionJudge",
    "is_chat_model",
    "is_prompt_function",
    "prompt_messages",
]
