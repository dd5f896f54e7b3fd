"""A scripted in-process Judge (implements the Judge protocol) for unit tests of prompt building
and verdict parsing; the integration tests use the real stand-in judge server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage

Reply = dict[str, Any] | str | BaseException | Callable[[JudgeRequest], Any]


class ScriptedJudge:
    """Answers each request with the next scripted reply: a dict (structured data), a str (free
    text, data=None), an exception (raised), or a callable of the request returning one of those."""

    name = "scripted"

    def __init__(self, *replies: Reply, cost: float = 0.001) -> None:
        self.replies = list(replies)
        self.requests: list[JudgeRequest] = []
        self.cost = cost

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        self.requests.append(request)
        reply: Any = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(request)
        if isinstance(reply, BaseException):
            raise reply
        usage = JudgeUsage(input_tokens=100, output_tokens=20, cost_usd=self.cost, calls=1)
        if isinstance(reply, str):
            return JudgeResponse(reply, None, usage, model="fake-1")
        return JudgeResponse(json.dumps(reply), reply, usage, model="fake-1")

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        return JudgeUsage(input_tokens=100, calls=1)

    def prompt(self, i: int = -1) -> str:
        """The text of the last user message of request ``i``."""
        content = [m for m in self.requests[i].messages if m["role"] == "user"][-1]["content"]
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


@pytest.fixture
def scripted() -> type[ScriptedJudge]:
    return ScriptedJudge
