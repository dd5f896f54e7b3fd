"""Each judge provider end to end against the stand-in judge server over real HTTP on 127.0.0.1:
Azure OpenAI deployments, Gemini generateContent, and a third-party provider found through the
``assay.judge_providers`` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.exceptions import ConfigError, JudgeAuthError, JudgeRequestError
from assay.judges import EndpointStats, JudgeEndpoint, JudgeRequest, JudgeResponse
from assay.judges import providers as registry
from assay.judges.config import JudgeConfig
from assay.testing.judge_server import JudgeServer, JudgeServerThread, Reply

#: A verdict schema as the judge evaluators write it: strict (additionalProperties), a nullable
#: field, an integer enum and a $ref, none of which Gemini's responseSchema takes as they are.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "$defs": {"grade": {"type": "string", "enum": ["pass", "fail"]}},
    "properties": {
        "reasoning": {"type": "string"},
        "grade": {"$ref": "#/$defs/grade"},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "note": {"type": ["string", "null"]},
        "score": {"type": "boolean"},
    },
    "required": ["reasoning", "grade", "level", "note", "score"],
}
REQUEST = JudgeRequest(
    [{"role": "system", "content": "Grade strictly."}, {"role": "user", "content": "Is 2+2=4?"}],
    schema=SCHEMA,
)


def complete(cfg: dict[str, Any], **server_kw: Any) -> tuple[Any, JudgeServer]:
    """One call through a fresh endpoint against a fresh server: (reply or exception, server)."""
    reply, server, _ = complete_with_stats(cfg, **server_kw)
    return reply, server


def complete_with_stats(cfg: dict[str, Any], **server_kw: Any) -> tuple[Any, JudgeServer, EndpointStats]:
    """One call ("URL" in the config replaced by the server's root): (reply or exception, server,
    the endpoint's counters)."""

    async def go() -> tuple[Any, JudgeServer, EndpointStats]:
        async with JudgeServer(**server_kw) as server:
            config = {k: (v.replace("URL", server.url) if isinstance(v, str) else v) for k, v in cfg.items()}
            async with JudgeEndpoint("j", {"max_retries": 2, "timeout": 5, **config}) as judge:
                try:
                    reply: Any = await judge.complete(REQUEST)
                except Exception as exc:  # returned for the test to inspect
                    reply = exc
            return reply, server, judge.stats

    return anyio.run(go)


# --- Azure OpenAI -----------------------------------------------------------------------------


def test_azure_openai_deployment_url_key_header_and_structured_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-secret")
    cfg = {"provider": "azure_openai", "base_url": "URL", "model": "gpt-4o", "deployment": "grader"}
    reply, server = complete(cfg, api_key="az-secret")
    assert isinstance(reply, JudgeResponse), reply
    assert set(reply.data) == set(SCHEMA["properties"])
    assert reply.usage.input_tokens > 0 and reply.model == "gpt-4o"
    assert server.stats.by_path == {"/openai/deployments/grader/chat/completions": 1}


def test_azure_openai_endpoint_from_the_environment_and_wrong_key_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "wrong-key")

    async def go() -> tuple[BaseException, BaseException, int]:
        async with JudgeServer(api_key="az-secret") as server:
            monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url + "/")
            async with JudgeEndpoint("az", {"provider": "azure_openai", "model": "gpt-4o"}) as judge:
                errors = []
                for _ in range(2):
                    try:
                        await judge.complete(REQUEST)
                    except JudgeAuthError as exc:
                        errors.append(exc)
            return errors[0], errors[1], server.stats.requests

    first, second, sent = anyio.run(go)
    assert sent == 1 and first is second  # the second call fails without a request
    assert "HTTP 401" in str(first) and "AZURE_OPENAI_API_KEY" in str(first) and "wrong-key" not in str(first)


def test_azure_openai_without_an_endpoint_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        JudgeEndpoint("az", {"provider": "azure_openai", "model": "gpt-4o"})


def test_azure_openai_429_waits_and_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    refusal = Reply(429, {"error": {"code": "429", "message": "exceeded call rate limit"}}, {"retry-after-ms": "5"})
    cfg = {"provider": "azure_openai", "base_url": "URL", "model": "gpt-4o"}
    reply, _, stats = complete_with_stats(cfg, responses=[refusal, {"score": True}])
    assert isinstance(reply, JudgeResponse) and reply.data == {"score": True}
    assert (stats.http_429, stats.requests, stats.ok) == (1, 2, 1)


def test_azure_as_openai_with_api_version_and_api_key_header_keeps_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_KEY", "az-secret")
    cfg = {
        "provider": "openai",
        "base_url": "URL/openai/deployments/legacy",
        "model": "gpt-4o",
        "api_version": "2024-06-01",
        "api_key_header": "api-key",
        "api_key_env": "AZURE_KEY",
    }
    reply, server = complete(cfg, api_key="az-secret")
    assert isinstance(reply, JudgeResponse) and set(reply.data) == set(SCHEMA["properties"])
    assert server.stats.by_path == {"/openai/deployments/legacy/chat/completions": 1}


# --- Google Gemini ----------------------------------------------------------------------------


@pytest.fixture
def gemini_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    return "g-secret"


def test_gemini_generate_content_with_response_schema(gemini_key: str) -> None:
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash", "seed": 3}
    reply, server = complete(cfg, api_key=gemini_key)
    assert isinstance(reply, JudgeResponse), reply
    data = reply.data
    assert list(data) == ["reasoning", "grade", "level", "note", "score"]  # propertyOrdering kept
    assert data["grade"] in ("pass", "fail") and isinstance(data["score"], bool)
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert reply.model == "gemini-2.5-flash"
    assert server.stats.by_path == {"/v1beta/models/gemini-2.5-flash:generateContent": 1}


def test_gemini_key_google_api_key_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}
    reply, _ = complete(cfg, api_key="google-key")
    assert isinstance(reply, JudgeResponse)
    assert JudgeConfig(provider="google_genai", model="m").resolved_key_env() == "GOOGLE_API_KEY"


def test_gemini_wrong_or_missing_key_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "not-the-key")
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}
    wrong, _ = complete(cfg, api_key="g-secret")
    assert isinstance(wrong, JudgeAuthError)  # a 400 API_KEY_INVALID is a wrong key, not a bad request
    assert "INVALID_ARGUMENT: API key not valid" in str(wrong) and "not-the-key" not in str(wrong)
    monkeypatch.delenv("GEMINI_API_KEY")
    missing, _ = complete(cfg, api_key="g-secret")
    assert isinstance(missing, JudgeAuthError) and "HTTP 403" in str(missing)


def test_gemini_429_waits_for_the_retry_info_in_the_body(gemini_key: str) -> None:
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}

    async def two() -> tuple[list[JudgeResponse], dict[str, Any]]:
        async with JudgeServer(api_key=gemini_key, rps=5, burst=1) as srv:
            config = {**cfg, "base_url": srv.url, "max_retries": 3}
            async with JudgeEndpoint("g", config) as judge:
                replies = [await judge.complete(REQUEST), await judge.complete(REQUEST)]
                return replies, judge.stats.to_dict() | {"server_429": srv.stats.rate_limited}

    replies, stats = anyio.run(two)
    assert all(r.data is not None for r in replies)
    assert stats["ok"] == 2 and stats["http_429"] == stats["server_429"] >= 1 and stats["errors"] == 0


def test_gemini_out_of_its_daily_quota_stops_the_run(gemini_key: str) -> None:
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}
    violation = {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaValue": "50"}
    details = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "35s"},
    ]
    error = {"code": 429, "message": "You exceeded your current quota", "status": "RESOURCE_EXHAUSTED"}
    reply, server = complete(cfg, responses=[Reply(429, {"error": {**error, "details": details}})])
    assert isinstance(reply, JudgeAuthError) and "out of quota" in str(reply) and "GEMINI_API_KEY" in str(reply)
    assert server.stats.requests == 1  # not waited out for 35 s, not retried


def test_gemini_other_400_is_an_error_at_once_and_500_is_retried(gemini_key: str) -> None:
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}
    bad = Reply(400, {"error": {"code": 400, "message": "Unsupported MIME type", "status": "INVALID_ARGUMENT"}})
    reply, server = complete(cfg, responses=[bad])
    assert isinstance(reply, JudgeRequestError) and "INVALID_ARGUMENT: Unsupported MIME type" in str(reply)
    assert server.stats.requests == 1
    down = Reply(503, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})
    reply, server = complete(cfg, responses=[down, {"score": True}])
    assert isinstance(reply, JudgeResponse) and reply.data == {"score": True} and server.stats.requests == 2


def test_gemini_blocked_prompt_is_an_error_result(gemini_key: str) -> None:
    cfg = {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}
    blocked = Reply(200, {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}})
    reply, _ = complete(cfg, responses=[blocked])
    assert isinstance(reply, JudgeRequestError) and "SAFETY" in str(reply)


# --- a whole run, the model shorthand ---------------------------------------------------------


@pytest.fixture
def server() -> Iterator[JudgeServerThread]:
    with JudgeServerThread(seed=5, api_key="run-key") as s:
        yield s


def _assay(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("judge", "env", "path"),
    [
        (
            {"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"},
            {"GEMINI_API_KEY": "run-key"},
            "/v1beta/models/gemini-2.5-flash:generateContent",
        ),
        (
            {"provider": "azure_openai", "base_url": "URL", "model": "gpt-4o", "deployment": "dep"},
            {"AZURE_OPENAI_API_KEY": "run-key"},
            "/openai/deployments/dep/chat/completions",
        ),
    ],
    ids=["google_genai", "azure_openai"],
)
def test_a_judged_run_with_each_new_provider(
    tmp_path: Path, server: JudgeServerThread, judge: dict[str, Any], env: dict[str, str], path: str
) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"}) + "\n" for i in range(12))
    )
    run = {
        "source": {"path": "corpus.jsonl"},
        "judges": {"j": {**judge, "base_url": server.url, "max_concurrency": 4}},
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
        "sink": {"path": "out/"},
    }
    (tmp_path / "run.yaml").write_text(json.dumps(run))
    proc = _assay(tmp_path, {"GOOGLE_API_KEY": "", **env}, "run", "run.yaml", "-q")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for p in sorted((tmp_path / "out").glob("part-*.jsonl")) for line in p.open()]
    assert len(rows) == 12
    assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in rows)
    assert server.stats.by_path[path] == 12


@pytest.mark.parametrize(
    ("model", "env"),
    [
        ("google_genai:gemini-2.5-flash", {"GOOGLE_GEMINI_BASE_URL": "URL", "GOOGLE_API_KEY": "run-key"}),
        ("azure_openai:gpt-4o", {"AZURE_OPENAI_ENDPOINT": "URL", "AZURE_OPENAI_API_KEY": "run-key"}),
    ],
)
def test_model_shorthand_for_the_new_providers(
    monkeypatch: pytest.MonkeyPatch, server: JudgeServerThread, model: str, env: dict[str, str]
) -> None:
    from assay.evaluators.catalog import create_trajectory_llm_as_judge

    for name, value in env.items():
        monkeypatch.setenv(name, value.replace("URL", server.url))
    judge = create_trajectory_llm_as_judge(model=model)
    result = judge.evaluate(outputs=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert result.error is None, result.error
    assert result.score in (0.0, 1.0) and server.stats.ok == 1


# --- a third-party provider through the entry point -------------------------------------------


PLUGIN = '''
"""A provider speaking OpenAI's body to a gateway that wants its own header and path."""
from typing import Any
from assay.judges.base import JudgeRequest
from assay.judges.providers.base import JudgeProvider
from assay.judges.wire import WireReply, json_object


class AcmeProvider(JudgeProvider):
    name = "acme"
    default_base_url = None
    key_envs = ("ACME_KEY",)
    key_header = "x-api-key"
    path = "/v1/chat/completions"

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        return {"model": self.config.model, "messages": request.messages, "temperature": 0}

    def parse_payload(self, payload: Any) -> WireReply:
        text = payload["choices"][0]["message"]["content"]
        return WireReply(text, json_object(text), 1, 1, "acme/" + payload["model"])
'''


@pytest.fixture
def acme_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``pip install acme-judge`` as it lands on disk: a module and a dist-info with the entry point."""
    site = tmp_path / "site"
    (site / "acme_judge").mkdir(parents=True)
    (site / "acme_judge" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "acme_judge-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-judge\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[assay.judge_providers]\nacme = acme_judge:AcmeProvider\n")
    monkeypatch.syspath_prepend(str(site))
    registry.clear_cache()
    yield
    monkeypatch.undo()
    registry.clear_cache()
    sys.modules.pop("acme_judge", None)


def test_a_third_party_provider_registered_by_entry_point(
    acme_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "acme" in registry.provider_names()
    monkeypatch.setenv("ACME_KEY", "acme-secret")
    reply, server = complete({"provider": "acme", "base_url": "URL", "model": "m"}, api_key="acme-secret")
    assert isinstance(reply, JudgeResponse) and reply.model == "acme/m" and "score should be" in reply.text
    assert server.stats.by_path == {"/v1/chat/completions": 1}
    from assay.evaluators.judge_base import model_shorthand

    assert model_shorthand("acme:m") == {"provider": "acme", "model": "m"}


def test_without_the_plugin_the_provider_is_unknown() -> None:
    registry.clear_cache()
    with pytest.raises(ConfigError, match=r"judges\.j\.provider: .*unknown provider 'acme'.*google_genai"):
        JudgeEndpoint("j", {"provider": "acme", "model": "m"})


@pytest.mark.parametrize(
    ("cfg", "env"),
    [
        ({"provider": "azure_openai", "base_url": "URL", "model": "gpt-4o"}, "AZURE_OPENAI_API_KEY"),
        ({"provider": "google_genai", "base_url": "URL", "model": "gemini-2.5-flash"}, "GOOGLE_API_KEY"),
    ],
    ids=["azure_openai", "google_genai"],
)
def test_the_servers_own_rate_limit_and_a_403_in_each_new_format(
    monkeypatch: pytest.MonkeyPatch, cfg: dict[str, Any], env: str
) -> None:
    monkeypatch.setenv(env, "k")

    async def paced() -> tuple[list[Any], dict[str, Any], int]:
        # one request per 2 s: the second comes back 429 in the provider's shape, waits, and passes
        async with JudgeServer(api_key="k", rps=0.5, burst=1, seed=4) as server:
            config = {**cfg, "base_url": server.url, "max_retries": 2}
            async with JudgeEndpoint("p", config) as judge:
                replies = [await judge.complete(REQUEST) for _ in range(2)]
                return replies, judge.stats.to_dict(), server.stats.rate_limited

    replies, stats, refused = anyio.run(paced)
    assert all(isinstance(r, JudgeResponse) and r.data for r in replies)
    assert stats["ok"] == 2 and stats["errors"] == 0 and stats["http_429"] == refused >= 1
    forbidden, server = complete(cfg, api_key="k", error_rate=1.0, fail_status=403)
    assert isinstance(forbidden, JudgeAuthError) and "HTTP 403" in str(forbidden)
    assert server.stats.requests == 1
