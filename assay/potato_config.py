"""potato's task config read as assay's run-file terms: its ``ai_support`` section becomes an inline
judge config, and a run file that pastes that section beside its ``evaluators:`` declares the judge
``ai_support``.

A pre-pass over the raw run-file mapping (:func:`ai_support_judge`, called by
:func:`assay.config.build_config` before validation), so the run file's models import no evaluator
or judge module. The potato evaluators (:mod:`assay.evaluators.potato`) use the same translation.

>>> judge_config({"ai_support": {"enabled": True, "endpoint_type": "vllm",
...     "ai_config": {"model": "qwen", "base_url": "http://127.0.0.1:8000/v1"}}})["provider"]
'openai'
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from assay.exceptions import ConfigError

#: potato endpoint_type -> (assay provider, default base URL or None, default key variable, default model)
_ENDPOINT_TYPES: dict[str, tuple[str, str | None, str | None, str]] = {
    "openai": ("openai", None, "OPENAI_API_KEY", "gpt-4o-mini"),
    "anthropic": ("anthropic", None, "ANTHROPIC_API_KEY", "claude-haiku-4-5-20251001"),
    "ollama": ("ollama", None, None, "llama3.2"),
    "vllm": ("openai", "http://localhost:8000/v1", None, "default"),
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "openai/gpt-4o-mini"),
    "open_router": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "openai/gpt-4o-mini"),
    "gemini": (
        "openai",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "gemini-2.0-flash",
    ),
    "huggingface": ("openai", "https://router.huggingface.co/v1", "HF_TOKEN", "meta-llama/Llama-3.1-8B-Instruct"),
}


def is_potato_config(obj: Any) -> bool:
    """Whether ``obj`` is a potato task config (holds ``ai_support`` or ``judge_alignment``)."""
    return isinstance(obj, Mapping) and ("ai_support" in obj or "judge_alignment" in obj)


def judge_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """An assay inline judge config from potato's ``ai_support`` section.

    A literal ``api_key`` is put in a process environment variable named after its hash (assay
    reads keys from the environment only, so they never appear in configs or logs).
    """
    section = config.get("judge_alignment", {}).get("ai_support") if "judge_alignment" in config else None
    ai = section or config.get("ai_support")
    if not isinstance(ai, Mapping):
        raise ConfigError("potato config: no ai_support section (config['ai_support'] or judge_alignment.ai_support)")
    if not ai.get("enabled", False):
        raise ConfigError("potato config: ai_support.enabled is not true, so there is no judge endpoint")
    kind = str(ai.get("endpoint_type", "openai")).removesuffix("_vision")
    if kind not in _ENDPOINT_TYPES:
        raise ConfigError(
            f"potato config: endpoint_type {kind!r} is not supported; use one of {sorted(_ENDPOINT_TYPES)}"
        )
    provider, base_url, key_env, model = _ENDPOINT_TYPES[kind]
    ai_config: Mapping[str, Any] = ai.get("ai_config") or {}
    out: dict[str, Any] = {"provider": provider, "model": str(ai_config.get("model") or model)}
    url = ai_config.get("base_url") or ai_config.get("api_base") or base_url
    if url:
        out["base_url"] = str(url)
    api_key = ai_config.get("api_key")
    if api_key and api_key != "EMPTY":
        env = "ASSAY_INLINE_KEY_" + hashlib.sha256(str(api_key).encode()).hexdigest()[:12].upper()
        os.environ[env] = str(api_key)
        out["api_key_env"] = env
    elif key_env and provider == "openai" and key_env != "OPENAI_API_KEY" and os.environ.get(key_env):
        out["api_key_env"] = key_env
    for name in ("max_tokens", "temperature", "timeout"):
        if ai_config.get(name) is not None:
            out[name] = ai_config[name]
    return out


def ai_support_judge(data: Any) -> Any:
    """The run file's ``ai_support`` section (potato's task config, pasted with its
    ``evaluators:``) as the judge ``ai_support``: the one judge every judge evaluator that names
    none uses. ``data`` is the raw run-file mapping; a copy without the section is returned."""
    if not isinstance(data, dict) or "ai_support" not in data:
        return data
    data = dict(data)
    section = data.pop("ai_support")
    judges = dict(data.get("judges") or {})
    if "ai_support" in judges:
        raise ConfigError("ai_support: a judge named 'ai_support' is declared under judges: too")
    judges["ai_support"] = judge_config({"ai_support": section})
    return {**data, "judges": judges}
