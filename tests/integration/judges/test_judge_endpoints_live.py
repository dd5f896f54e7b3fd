"""Judge endpoints against the stand-in judge server on loopback: wire formats, 429 handling and
adaptation, retries, timeouts, the budget, the cache and key redaction."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from assay.exceptions import BudgetExceeded, JudgeAuthError, JudgeError, JudgeRequestError, JudgeUnavailableError
from assay.judges import JudgeEndpoint, JudgePool, JudgeRequest, JudgeResponse, resolve_judge
from assay.testing.judge_server import JudgeServer, JudgeServerThread, LimitKind, Reply

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}},
    "required": ["reasoning", "score"],
}
BASES = {"openai": "/v1", "anthropic": "/v1", "ollama": ""}


def request(i: int | str = 0, **kw: Any) -> JudgeRequest:
    return JudgeRequest(
        [{"role": "system", "content": "You grade answers."}, {"role": "user", "content": f"Answer {i}: 4"}],
        schema=SCHEMA,
        **kw,
    )


def judge_config(server: JudgeServer, provider: str = "openai", **kw: Any) -> dict[str, Any]:
    return {
        "provider": provider,
        "base_url": server.url + BASES[provider],
        "model": "stand-in",
        "api_key_env": None,
        **kw,
    }


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn)


async def complete_all(judge: JudgeEndpoint, n: int) -> tuple[list[JudgeResponse], list[BaseException]]:
    ok: list[JudgeResponse] = []
    failed: list[BaseException] = []

    async def one(i: int) -> None:
        try:
            ok.append(await judge.complete(request(i)))
        except JudgeError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return ok, failed


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_wire_round_trip(provider: str, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def rule(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"reasoning": "4 is right", "score": True}

    async def main() -> None:
        async with JudgeServer(rule=rule) as server:
            cfg = judge_config(server, provider, seed=5, input_price_per_mtok=2.0, output_price_per_mtok=8.0)
            async with JudgePool.from_config({"g": cfg}, state_dir=tmp_path) as pool:
                reply = await pool.get("g").complete(request())
            assert reply.data == {"reasoning": "4 is right", "score": True}
            assert json.loads(reply.text) == reply.data
            assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0 and reply.usage.calls == 1
            assert reply.usage.cost_usd == pytest.approx(
                (reply.usage.input_tokens * 2 + reply.usage.output_tokens * 8) / 1e6
            )
            assert pool.spent_usd == pytest.approx(reply.usage.cost_usd)
            assert server.stats.ok == 1
            path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}[provider]
            assert server.stats.by_path == {path: 1}

    run(main)
    body = seen[0]
    if provider == "anthropic":
        assert body["tool_choice"]["type"] == "tool" and body["system"] == "You grade answers."
    elif provider == "ollama":
        assert body["format"] == SCHEMA and body["stream"] is False and body["options"]["seed"] == 5
    else:
        assert body["response_format"]["json_schema"]["schema"] == SCHEMA and body["seed"] == 5


def test_default_verdict_is_deterministic_and_fills_the_schema(tmp_path: Path) -> None:
    async def main() -> list[Any]:
        async with JudgeServer() as server, JudgeEndpoint("g", judge_config(server, "anthropic")) as judge:
            return [(await judge.complete(request(i))).data for i in (1, 2, 1)]

    first, second, again = run(main)
    assert first == again and set(first) == {"reasoning", "score"} and isinstance(first["score"], bool)
    assert second["reasoning"] != first["reasoning"]


def test_text_verdict_and_multimodal_to_anthropic(tmp_path: Path) -> None:
    seen: list[Any] = []

    def rule(body: dict[str, Any]) -> str:
        seen.append(body["messages"][0]["content"])
        return "Looks fine. Score: true"

    image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
    req = JudgeRequest([{"role": "user", "content": [{"type": "text", "text": "Is it a cat?"}, image]}], schema=SCHEMA)

    async def main() -> JudgeResponse:
        async with JudgeServer(rule=rule) as server, JudgeEndpoint("g", judge_config(server, "anthropic")) as judge:
            return await judge.complete(req)

    reply = run(main)
    assert reply.text == "Looks fine. Score: true" and reply.data is None  # salvage is the verdict parser's job
    assert seen[0][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}}


def test_a_coarse_retry_after_slows_the_endpoint_without_silencing_it() -> None:
    """Server: 4 req/s, bucket of 1, only "Retry-After: 1" (no ms hint). Client: 10x too fast.
    The rate comes down to the server's, every call succeeds, refusals stay few; a whole second of
    silence after each "Retry-After: 1" is not needed while the server accepts requests."""

    async def main() -> tuple[list[tuple[float, int]], dict[str, Any], int]:
        async with JudgeServer(rps=4, burst=1, retry_after_ms=False) as server:
            async with JudgeEndpoint("g", judge_config(server, rpm=2400, max_retries=10)) as judge:
                ok, failed = await complete_all(judge, 16)
            assert not failed
            return list(server.stats.arrivals), judge.snapshot(), len(ok)

    arrivals, stats, ok = run(main)
    assert ok == 16
    refused = [t for t, status in arrivals if status == 429]
    assert refused and stats["http_429"] == len(refused) and stats["retries"] == len(refused)
    assert len(refused) <= 12, stats  # a handful while the rate comes down from 40/s, not a storm
    assert stats["rate_rpm"] <= 1.2 * 4 * 60, stats
    accepted = sorted(t for t, status in arrivals if status != 429)
    # after the first refusal, the accepted requests follow the server's pace (about 1/4 s apart)
    later = [b - a for a, b in itertools.pairwise(accepted) if a > refused[0]]
    assert later and min(later) >= 0.2, later


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, {"retry-after", "retry-after-ms", "x-ratelimit-reset-requests"}),
        ({"retry_after_ms": False}, {"retry-after"}),
        ({"retry_hints": False}, set()),
    ],
    ids=["precise", "coarse", "bare"],
)
def test_stand_in_429_hints(kw: dict[str, Any], expected: set[str]) -> None:
    """The stand-in's 429 carries every hint, only an integer Retry-After, or none (nginx's limit_req)."""

    async def main() -> tuple[list[int], set[str]]:
        async with JudgeServer(rps=1, burst=1, **kw) as server, aiohttp.ClientSession() as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            statuses, hints = [], set()
            for _ in range(2):
                async with http.post(server.url + "/v1/chat/completions", json=body) as resp:
                    statuses.append(resp.status)
                    names = {h.lower() for h in resp.headers}
                    hints = names & {"retry-after", "retry-after-ms", "x-ratelimit-reset-requests"}
            return statuses, hints

    statuses, hints = run(main)
    assert statuses == [200, 429]
    assert hints == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("bucket", [200] * 3 + [429]), ("second", [200] * 3 + [429]), ("spacing", [200] + [429] * 3)],
)
def test_stand_in_limit_kinds_in_a_burst(kind: LimitKind, expected: list[int]) -> None:
    """Four requests at once against 3 req/s: a full bucket and a fixed second take three, strict spacing one."""

    async def main() -> list[int]:
        async with JudgeServer(rps=3, limit_kind=kind) as server, aiohttp.ClientSession() as http:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            statuses = []
            for _ in range(4):
                async with http.post(server.url + "/v1/chat/completions", json=body) as resp:
                    statuses.append(resp.status)
            return statuses

    assert run(main) == expected


def test_adaptive_rate_converges_when_configured_3x_too_high() -> None:
    # 200 calls: the server's first-second burst of 20 hides its limit for a third of a second, so
    # a shorter run measures mostly that start; the refusal share below is for the whole run
    n, real = 200, 20.0

    async def main() -> tuple[float, int, int, dict[str, Any]]:
        async with JudgeServer(rps=real, latency=(0.05, 0.15), seed=4) as server:
            cfg = judge_config(server, rpm=3 * real * 60, max_concurrency=32, max_retries=10)
            async with JudgeEndpoint("g", cfg) as judge:
                began = time.monotonic()
                ok, failed = await complete_all(judge, n)
                wall = time.monotonic() - began
            assert not failed and len(ok) == n
            return wall, server.stats.requests, server.stats.rate_limited, judge.snapshot()

    _wall, requests, refused, stats = run(main)
    # counts, not shares or wall time (those are measured in benchmarks/bench_judge.py): every call
    # answered once, each refusal retried once, and the rate came down from 3x towards the real one
    assert requests == n + refused, stats
    assert refused < n, stats  # not a storm: a storm is a refusal per call or more
    assert stats["rate_rpm"] < 1.15 * real * 60  # came down from 3x


def test_400_is_not_retried_and_its_message_surfaces() -> None:
    def rule(body: dict[str, Any]) -> Reply:
        return Reply(400, {"error": {"message": "response_format.schema: 'foo' is not valid", "type": "invalid"}})

    async def main() -> None:
        async with JudgeServer(rule=rule) as server, JudgeEndpoint("g", judge_config(server)) as judge:
            with pytest.raises(
                JudgeRequestError, match=r"HTTP 400: invalid: response_format\.schema: 'foo' is not valid"
            ):
                await judge.complete(request())
            assert server.stats.requests == 1
            assert judge.stats.retries == 0 and judge.stats.errors == 1 and judge.stats.http_4xx == 1

    run(main)


def test_5xx_retried_then_exhausted() -> None:
    async def main() -> None:
        async with JudgeServer(error_rate=0.3, seed=11) as server, JudgeEndpoint("g", judge_config(server)) as judge:
            ok, failed = await complete_all(judge, 20)
            assert len(ok) == 20 and not failed
            assert judge.stats.http_5xx == server.stats.server_errors > 0
            assert judge.stats.retries == judge.stats.http_5xx
        async with JudgeServer(error_rate=1.0) as server:
            # an endpoint that answers only 5xx is reachable: each call is retried and fails (an
            # error result; max_error_rate fails the run), only a long outage opens the breaker
            judge = JudgeEndpoint("g", judge_config(server, max_retries=2))
            with pytest.raises(JudgeError, match="gave up after 3 attempt"):
                await judge.complete(request())
            assert server.stats.requests == 3 and not judge.breaker.open

    run(main)


def test_429s_do_not_spend_the_retry_budget_but_have_one_of_their_own() -> None:
    """A 429 is the endpoint pacing us: a request refused three times is still answered with
    max_retries=1; one refused without end gives up after RATE_LIMITED_BUDGET x (max_retries + 1)."""
    from assay.judges.endpoint import RATE_LIMITED_BUDGET

    limited = Reply(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"retry-after-ms": "5"})
    seen = itertools.count()

    def three_refusals(_req: dict[str, Any]) -> Reply | dict[str, Any]:
        return limited if next(seen) < 3 else {"reasoning": "fine", "score": True}

    async def main() -> None:
        async with JudgeServer(rule=three_refusals) as server:
            async with JudgeEndpoint("g", judge_config(server, rpm=None, max_retries=1)) as judge:
                answer = await judge.complete(request())
            assert answer.data == {"reasoning": "fine", "score": True}
            assert server.stats.requests == 4
        async with JudgeServer(rule=lambda _req: limited) as server:
            async with JudgeEndpoint("g", judge_config(server, rpm=None, max_retries=1)) as judge:
                with pytest.raises(JudgeError, match="refused with 429"):
                    await judge.complete(request())
            assert server.stats.requests == RATE_LIMITED_BUDGET * 2

    run(main)


def test_hung_requests_time_out_and_are_retried() -> None:
    async def main() -> None:
        async with JudgeServer(hang_rate=0.3, seed=2) as server:
            judge = JudgeEndpoint("g", judge_config(server, timeout=0.3, max_retries=8))
            began = time.monotonic()
            ok, failed = await complete_all(judge, 12)
            assert len(ok) == 12 and not failed
            assert judge.stats.timeouts == server.stats.hangs > 0
            assert judge.stats.retries >= judge.stats.timeouts
            assert time.monotonic() - began < 10

    run(main)


def test_budget_stops_before_the_call_that_would_cross_it(tmp_path: Path) -> None:
    """Calls go out while the next one fits: with 2.5 calls' worth of budget, two are made and the
    third (which would cross it) is refused — the estimate is calibrated by the real costs."""

    async def main() -> None:
        async with JudgeServer() as server:
            cfg = judge_config(server, input_price_per_mtok=1000.0, output_price_per_mtok=1000.0)
            pool = JudgePool.from_config({"g": cfg}, state_dir=tmp_path, use_cache=False)
            async with pool:
                judge = pool.get("g")
                first = await judge.complete(request(0))
                pool.budget.limit_usd = first.usage.cost_usd * 2.5
                await judge.complete(request(1))
                with pytest.raises(BudgetExceeded, match="the next call to judge 'g'"):
                    await judge.complete(request(2))  # spent 2x, and one more would make 3x > 2.5x
            assert server.stats.requests == 2
            assert pool.spent_usd <= pool.budget.limit_usd
            assert pool.stats()["g"]["budget_refusals"] == 1

    run(main)


def test_cache_makes_a_rerun_free_errors_are_not_cached_and_ttl(tmp_path: Path) -> None:
    def rule(body: dict[str, Any]) -> dict[str, Any] | Reply:
        if "Answer bad" in json.dumps(body):
            return Reply(400, {"error": {"message": "no"}})
        return {"reasoning": "fine", "score": True}

    async def one_run(server: JudgeServer, **pool_kw: Any) -> tuple[list[Any], dict[str, Any]]:
        pool = JudgePool.from_config({"g": judge_config(server)}, state_dir=tmp_path, **pool_kw)
        async with pool:
            judge = pool.get("g")
            replies = [await judge.complete(request(i)) for i in range(5)]
            with pytest.raises(JudgeRequestError):
                await judge.complete(request("bad"))
            return [(r.data, r.cached) for r in replies], pool.stats()["g"]

    async def main() -> None:
        async with JudgeServer(rule=rule) as server:
            first, _ = await one_run(server)
            assert server.stats.requests == 6
            second, stats = await one_run(server)
            assert server.stats.requests == 7  # only the error went out again
            assert [d for d, _ in second] == [d for d, _ in first]
            assert all(cached for _, cached in second) and stats["cached"] == 5 and stats["cost_usd"] == 0
            await one_run(server, use_cache=False)
            assert server.stats.requests == 13
            await anyio.sleep(0.2)
            await one_run(server, cache_ttl_s=0.1)
            assert server.stats.requests == 19  # everything older than the TTL is asked again

    run(main)
    assert (tmp_path / "judge_cache.sqlite").exists()


def test_an_answer_without_its_score_is_never_cached_nor_replayed(tmp_path: Path) -> None:
    """A judge answering ``{"reasoning": …}`` with no ``score`` (or a score the schema does not
    allow): the evaluator gets an error result, and a rerun asks the judge again instead of
    replaying the same error from the cache with 0 requests."""
    answers = iter(
        [
            {"reasoning": "forgot the score"},
            {"reasoning": "null", "score": None},
            {"reasoning": "word", "score": "maybe"},
            {"reasoning": "fine", "score": True},
        ]
    )

    async def one_run(server: JudgeServer) -> tuple[Any, bool]:
        pool = JudgePool.from_config({"g": judge_config(server)}, state_dir=tmp_path)
        async with pool:
            reply = await pool.get("g").complete(request("same"))
            return reply.data, reply.cached

    async def main() -> None:
        async with JudgeServer(rule=lambda body: next(answers)) as server:
            for i in range(3):  # three unusable answers: each rerun goes to the judge again
                data, cached = await one_run(server)
                assert not cached and data.get("score") in (None, "maybe")
                assert server.stats.requests == i + 1
            assert await one_run(server) == ({"reasoning": "fine", "score": True}, False)
            assert await one_run(server) == ({"reasoning": "fine", "score": True}, True)  # a usable one is
            assert server.stats.requests == 4

    run(main)


def test_a_cached_answer_without_its_score_is_asked_again(tmp_path: Path) -> None:
    """An unusable answer cached by an older assay is not replayed: it is a miss, then replaced."""
    from assay.judges.cache import JudgeCache

    async def main() -> None:
        async with JudgeServer(rule=lambda body: {"reasoning": "fine", "score": True}) as server:
            pool = JudgePool.from_config({"g": judge_config(server)}, state_dir=tmp_path)
            async with pool:
                judge = pool.get("g")
                _body, key = judge.body_and_key(request("old"))
            async with JudgeCache(tmp_path / "judge_cache.sqlite") as cache:
                await cache.put(key, {"text": '{"reasoning": "no score"}', "data": {"reasoning": "no score"}})
            for cached in (False, True):
                pool = JudgePool.from_config({"g": judge_config(server)}, state_dir=tmp_path)
                async with pool:
                    reply = await pool.get("g").complete(request("old"))
                assert (reply.data, reply.cached) == ({"reasoning": "fine", "score": True}, cached)
            assert server.stats.requests == 1

    run(main)


def test_api_key_never_leaks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = "sk-test-7f3a9c1e5b2d"
    monkeypatch.setenv("ASSAY_TEST_JUDGE_KEY", secret)

    async def main() -> None:
        async with JudgeServer(api_key="the-right-key") as server:  # echoes the wrong key, like OpenAI does
            cfg = judge_config(server, api_key_env="ASSAY_TEST_JUDGE_KEY")
            pool = JudgePool.from_config({"g": cfg}, state_dir=tmp_path)
            async with pool:
                with pytest.raises(JudgeAuthError) as info:
                    await pool.get("g").complete(request())
                assert "Incorrect API key provided: ***" in str(info.value)
                shown = [str(info.value), repr(info.value), repr(pool), repr(pool.get("g")), json.dumps(pool.stats())]
                shown.append(repr(pool.get("g").config))
                assert not any(secret in text for text in shown)
        async with JudgeServer(api_key=secret) as server:
            cfg = judge_config(server, provider="anthropic", api_key_env="ASSAY_TEST_JUDGE_KEY")
            async with JudgeEndpoint("g", cfg) as judge:
                assert (await judge.complete(request())).data is not None  # the key does reach the server

    run(main)


def test_adhoc_endpoint_across_event_loops() -> None:
    """The library's sync evaluate() runs a new loop per call: the session is rebuilt each time."""
    with JudgeServerThread() as server:
        spec = {"base_url": server.url + "/v1", "model": "stand-in", "api_key_env": None}
        pool = JudgePool({})
        for i in range(3):
            judge = resolve_judge(spec, pool)

            async def call(i: int = i, judge: Any = judge) -> JudgeResponse:
                return await judge.complete(request(i))  # type: ignore[no-any-return]

            assert run(call).data is not None
        assert server.stats.ok == 3
        assert resolve_judge(spec, pool).stats.ok >= 3  # type: ignore[attr-defined]


def test_server_command_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.judge_server", "--port", "0", "--latency", "0.01-0.02", "--seed", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:")

        async def main() -> tuple[int, dict[str, Any]]:
            async with aiohttp.ClientSession() as http:
                body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
                async with http.post(url + "/api/chat", json=body) as resp:
                    status = resp.status
                async with http.get(url + "/stats") as resp:
                    return status, await resp.json()

        status, stats = run(main)
        assert status == 200 and stats["ok"] == 1 and stats["by_path"] == {"/api/chat": 1}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_unreachable_endpoint_opens_the_breaker_after_one_retry_budget() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def main() -> None:
        cfg = {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "api_key_env": None, "max_retries": 2}
        judge = JudgeEndpoint("g", cfg)
        with pytest.raises(JudgeUnavailableError, match="3 attempts failed and none succeeded"):
            await judge.complete(request())
        with pytest.raises(JudgeUnavailableError):  # later calls fail fast, without sending
            await judge.complete(request())
        assert judge.stats.connection_errors == 3

    run(main)
