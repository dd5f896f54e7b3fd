"""Shared samples: the same small agent run recorded in every supported trace format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "formats"

QUESTION = "What's the weather in Paris right now, and what's the forecast for tomorrow?"
FINAL = "It's 18°C and sunny in Paris right now. Tomorrow expect a high of 20°C with light rain."
EXPECTED_CALLS = [("get_weather", {"city": "Paris"}), ("get_forecast", {"city": "Paris", "days": 1})]
EXPECTED_RESULTS = [
    '{"temp_c": 18, "conditions": "sunny"}',
    '{"day": "tomorrow", "high_c": 20, "conditions": "light rain"}',
]

#: fixture file -> the format auto-detection must pick
FORMAT_OF: dict[str, str] = {
    "openai.json": "openai",
    "openai_responses.json": "openai_responses",
    "openai_responses_items.json": "openai_responses",
    "anthropic.json": "anthropic",
    "langchain_dicts.json": "langchain",
    "langchain_dumpd.json": "langchain",
    "langchain_messages_to_dict.json": "langchain",
    "potato.json": "potato",
    "otel_semconv.json": "otel",
    "otel_events.json": "otel",
    "otel_openllmetry.json": "otel",
    "langsmith.json": "langsmith",
    "langsmith_flat.json": "langsmith",
    "langfuse.json": "langfuse",
    "claude_code_session.jsonl": "claude_code",
    "claude_agent_sdk_stream.jsonl": "claude_code",
    "langsmith_agent_executor.json": "langsmith",
    "litellm_standard_logging_payload.json": "gateway",
    "helicone.json": "gateway",
    "portkey.json": "gateway",
    "proxy_log.json": "gateway",
    "langgraph_thread_state.json": "langgraph",
    "langgraph_checkpoint.json": "langgraph",
    "langchain_agent_executor_result.json": "langchain_agent",
}


def load_fixture(name: str) -> Any:
    path = FIXTURES / name
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return json.loads(path.read_text(encoding="utf-8"))
