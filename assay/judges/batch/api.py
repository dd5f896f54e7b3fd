"""Batch clients: the generic :class:`BatchAPI` (HTTP, auth, errors) and one thin subclass per
provider family that knows its request lines, its lifecycle and its result lines.

* :class:`OpenAIBatches` (OpenAI, Azure OpenAI, OpenAI-compatible gateways): the lines are
  uploaded as a JSONL file (``POST /files``, ``purpose=batch``), then ``POST /batches`` with
  ``metadata.assay_batch`` = the ledger's batch id; results come from the output and error files.
* :class:`AnthropicBatches`: ``POST /messages/batches`` with ``requests``; results stream from the
  batch's ``results_url``.

Each result line is classified: ``done`` (an answer: its body is parsed by the realtime wire
format), ``retry`` (expired, cancelled, a 5xx or a 429 inside the batch) or ``invalid`` (a 4xx:
the provider's message becomes the error result). A 401/403 raises
:class:`~assay.exceptions.JudgeAuthError` (the run stops, exit 2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import orjson

from assay.exceptions import ConnectorError, JudgeAuthError, JudgeError
from assay.judges.config import JudgeConfig
from assay.judges.guard import Secrets
from assay.judges.wire import error_message

if TYPE_CHECKING:
    import aiohttp

#: A poll or listing that meets a 5xx or a dropped connection is tried again this many times.
GET_RETRIES = 4
GET_BACKOFF_S = 1.0
"""The first wait before such a retry (doubling each time), or the judge's ``poll_interval_s`` when
shorter: a run that polls every 0.2 s retries as briskly (see :func:`get_backoff`)."""


def get_backoff(config: JudgeConfig, attempt: int) -> float:
    """Seconds before retry ``attempt`` (0-based) of a GET: the backoff grows from the smaller of
    :data:`GET_BACKOFF_S` and the judge's poll interval."""
    return float(min(GET_BACKOFF_S, config.batch.poll_interval_s) * 2**attempt)


#: Read size of result downloads (they are streamed line by line, never held whole).
_CHUNK = 1 << 16


class BatchRefused(JudgeError):
    """The provider would not take a batch now (enqueued-token quota, a 429 on create): wait and retry."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(JudgeError):
    """A 404 from the batch API: a missing batch or file, or a wrong ``base_url``."""


class BatchNotFound(JudgeError):
    """The provider answers, but no longer knows this batch (or its result files): deleted, made
    with another key or workspace, or gone in a reset. Its answers cannot be had any more."""

    def __init__(self, provider_id: str, message: str) -> None:
        super().__init__(message)
        self.provider_id = provider_id


@dataclass(slots=True)
class RemoteBatch:
    """A batch as the provider reports it."""

    id: str
    state: str
    """The provider's status (``in_progress``, ``completed``, ``ended``, ...)."""
    done: bool
    """Finished one way or another: its results can be collected."""
    counts: dict[str, int] = field(default_factory=dict)
    refused: bool = False
    """Failed for the enqueued-token quota (``token_limit_exceeded``): resubmit later, no attempt spent."""
    error: str | None = None
    """A batch-level failure (validation), with the provider's message."""
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LineResult:
    custom_id: str
    outcome: str  # done | retry | invalid
    body: dict[str, Any] | None = None
    """The response body (``done``): what a real-time call would have answered."""
    error: str | None = None


class Wire(Protocol):
    """What a batcher needs of its judge's provider object
    (:class:`~assay.judges.providers.base.JudgeProvider`; the provider makes its batcher, so this
    module imports no provider)."""

    config: JudgeConfig

    @property
    def batch_limits(self) -> tuple[int, int] | None: ...

    def base_url(self) -> str: ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...


class BatchAPI:
    """The HTTP side shared by every provider: headers, errors, auth failures, streaming reads.
    A provider with a batch API makes its subclass in ``JudgeProvider.batcher``."""

    provider: ClassVar[str] = ""

    def __init__(
        self,
        name: str,
        wire: Wire,
        api_key: str | None,
        secrets: Secrets | None = None,
        *,
        api_version: str | None = None,
    ) -> None:
        self.name = name
        self.config = config = wire.config
        self.wire = wire
        """The judge's provider object: auth headers, the wire format of every line."""
        self._api_version = api_version
        self.api_key = api_key
        self.secrets = secrets if secrets is not None else Secrets()
        self.secrets.add(api_key)
        self.root = (config.batch.base_url or self.default_root()).rstrip("/")
        self._session: aiohttp.ClientSession | None = None
        self.requests = 0

    def default_root(self) -> str:
        return self.wire.base_url()

    def limits(self) -> tuple[int, int]:
        """(requests, bytes) per batch: the judge's ``batch:`` settings, else the provider's own."""
        assert self.wire.batch_limits is not None  # (a provider that makes a batcher has them)
        return self.config.batch.limits(self.wire.batch_limits)

    async def __aenter__(self) -> BatchAPI:
        import aiohttp

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=300))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use `async with` on the batch client")
        return self._session

    # --- provider-specific -----------------------------------------------------------------------

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request line of a batch."""
        raise NotImplementedError

    async def create(self, batch: str, path: Path, count: int) -> RemoteBatch:
        """Create a batch from the JSONL file of lines at ``path`` (``batch``: the ledger's id)."""
        raise NotImplementedError

    async def get(self, provider_id: str) -> RemoteBatch:
        raise NotImplementedError

    def results(self, remote: RemoteBatch) -> AsyncIterator[LineResult]:
        raise NotImplementedError

    async def find(self, batch: str, created_after: float, count: int, known: set[str]) -> RemoteBatch | None:
        """The batch a killed process created without recording it, or None."""
        raise NotImplementedError

    async def cancel(self, provider_id: str) -> RemoteBatch:
        raise NotImplementedError

    list_path: ClassVar[str] = ""
    """The listing of the account's batches (``?limit=1`` tells a 404 of a batch from a wrong URL)."""

    async def missing(self, provider_id: str, exc: NotFound) -> BatchNotFound:
        """A 404 about batch ``provider_id``: :class:`BatchNotFound` when the listing of batches
        answers (the API is there, the batch is not); the 404 itself otherwise (a wrong
        ``base_url`` must not make a run forget its batches)."""
        try:
            await self.request("GET", self.list_path + "?limit=1")
        except JudgeError:
            raise exc from None
        return BatchNotFound(
            provider_id,
            f"judge {self.name!r}: the provider no longer knows batch {provider_id} "
            f"(deleted, made with another key or workspace, or reset): {exc}",
        )

    # --- shared --------------------------------------------------------------------------------

    def headers(self, *, json: bool = True) -> dict[str, str]:
        headers = self.wire.headers(self.api_key)
        if not json:
            headers.pop("content-type", None)
        return headers

    def url(self, path: str) -> str:
        url = self.root + path
        version = self.api_version()
        if version:
            url += ("&" if "?" in url else "?") + f"api-version={version}"
        return url

    def api_version(self) -> str | None:
        """A query parameter every call carries (Azure's ``api-version``)."""
        return self._api_version

    async def request(self, method: str, path: str, *, data: Any = None, json_body: Any = None) -> Any:
        """One JSON call; 401/403 → JudgeAuthError, 429 → BatchRefused, other errors → JudgeError
        (4xx) or ConnectorError (5xx, unreachable), always with the provider's message. A GET
        (poll, list) is tried again on 5xx and connection errors (GET_RETRIES times, backing off);
        a create is not (the ledger and :meth:`find` cover an unknown outcome)."""
        for attempt in range(GET_RETRIES + 1 if method == "GET" else 1):
            try:
                return await self._request_once(method, path, data=data, json_body=json_body)
            except ConnectorError:
                if method != "GET" or attempt == GET_RETRIES:
                    raise
                await asyncio.sleep(get_backoff(self.config, attempt))
        raise AssertionError("unreachable")

    async def _request_once(self, method: str, path: str, *, data: Any = None, json_body: Any = None) -> Any:
        import aiohttp

        headers = self.headers(json=data is None)
        body = orjson.dumps(json_body) if json_body is not None else data
        self.requests += 1
        try:
            async with self.session.request(method, self.url(path), data=body, headers=headers) as resp:
                text = await resp.text()
                if resp.status < 400:
                    return orjson.loads(text) if text.strip() else {}
                await self._raise(resp.status, text, resp.headers.get("retry-after"))
        except aiohttp.ClientError as exc:
            raise ConnectorError(f"judge {self.name!r}: batch API unreachable: {exc}") from exc
        raise AssertionError("unreachable")

    async def _raise(self, status: int, text: str, retry_after: str | None) -> None:
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            payload = None
        message = self.secrets.redact(f"judge {self.name!r}: batch API HTTP {status}: {error_message(payload, text)}")
        if status in (401, 403):
            raise JudgeAuthError(message)
        if status == 429:
            try:
                after = float(retry_after) if retry_after else None
            except ValueError:
                after = None
            raise BatchRefused(message, after)
        if status >= 500:
            raise ConnectorError(message)
        if status == 404:
            raise NotFound(message)
        if "token_limit_exceeded" in message or "enqueued token" in message.lower():
            raise BatchRefused(message)  # a gateway that refuses the quota on create with a 4xx
        raise JudgeError(message)

    async def stream_lines(self, url: str) -> AsyncIterator[bytes]:
        """The lines of a (large) JSONL download, read in chunks."""
        import aiohttp

        self.requests += 1
        try:
            async with self.session.get(url, headers=self.headers(json=False)) as resp:
                if resp.status >= 400:
                    await self._raise(resp.status, await resp.text(), None)
                buffer = b""
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield line
                if buffer.strip():
                    yield buffer
        except aiohttp.ClientError as exc:
            raise ConnectorError(f"judge {self.name!r}: batch results unreachable: {exc}") from exc


def _status_outcome(status: int) -> str:
    return "retry" if status == 429 or status >= 500 or status == 408 else "invalid"


class OpenAIBatches(BatchAPI):
    """OpenAI's files + batches API (also Azure OpenAI and OpenAI-compatible gateways)."""

    provider = "openai"
    TERMINAL: ClassVar[frozenset[str]] = frozenset({"completed", "failed", "expired", "cancelled"})
    default_line_url: ClassVar[str] = "/v1/chat/completions"

    @property
    def line_url(self) -> str:
        return self.config.batch.line_url or self.default_line_url

    def api_version(self) -> str | None:
        return self._api_version or self.config.api_version

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": self.line_url, "body": body}

    async def create(self, batch: str, path: Path, count: int) -> RemoteBatch:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        with path.open("rb") as f:
            form.add_field("file", f, filename=path.name, content_type="application/jsonl")
            uploaded = await self.request("POST", "/files", data=form)
        created = await self.request(
            "POST",
            "/batches",
            json_body={
                "input_file_id": uploaded["id"],
                "endpoint": self.line_url,
                "completion_window": self.config.batch.completion_window,
                "metadata": {"assay_batch": batch},
            },
        )
        return self._remote(created)

    def _remote(self, raw: dict[str, Any]) -> RemoteBatch:
        state = str(raw.get("status"))
        errors = ((raw.get("errors") or {}).get("data")) or []
        refused = any(e.get("code") == "token_limit_exceeded" for e in errors)
        error = None
        if state == "failed" and not refused:
            error = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or "batch failed"
        counts = {k: int(v) for k, v in (raw.get("request_counts") or {}).items()}
        return RemoteBatch(str(raw["id"]), state, state in self.TERMINAL, counts, refused, error, raw)

    list_path = "/batches"

    async def get(self, provider_id: str) -> RemoteBatch:
        try:
            return self._remote(await self.request("GET", f"/batches/{provider_id}"))
        except NotFound as exc:
            raise await self.missing(provider_id, exc) from None

    async def cancel(self, provider_id: str) -> RemoteBatch:
        try:
            return self._remote(await self.request("POST", f"/batches/{provider_id}/cancel"))
        except NotFound as exc:
            raise await self.missing(provider_id, exc) from None

    async def results(self, remote: RemoteBatch) -> AsyncIterator[LineResult]:
        for key in ("output_file_id", "error_file_id"):
            file_id = remote.raw.get(key)
            if not file_id:
                continue
            try:
                async for raw in self.stream_lines(self.url(f"/files/{file_id}/content")):
                    yield self._line(orjson.loads(raw))
            except NotFound as exc:  # the result file was deleted: its answers are gone
                raise await self.missing(remote.id, exc) from None

    def _line(self, item: dict[str, Any]) -> LineResult:
        cid = str(item.get("custom_id"))
        response = item.get("response") or None
        error = item.get("error") or None
        if response is not None:
            status = int(response.get("status_code") or 0)
            body = response.get("body")
            if status == 200 and isinstance(body, dict):
                return LineResult(cid, "done", body)
            message = f"HTTP {status}: {error_message(body, orjson.dumps(body).decode())}"
            return LineResult(cid, _status_outcome(status), error=self.secrets.redact(message))
        code = str((error or {}).get("code") or "")
        message = f"{code}: {(error or {}).get('message') or ''}".strip()
        # expired, cancelled, rate-limited or failed on the server's side: submitted again; only a
        # line the provider calls invalid is an error result at once
        return LineResult(cid, "invalid" if "invalid" in code else "retry", error=message)

    async def find(self, batch: str, created_after: float, count: int, known: set[str]) -> RemoteBatch | None:
        after: str | None = None
        for _ in range(20):  # the 2,000 newest batches at most
            path = "/batches?limit=100" + (f"&after={after}" if after else "")
            page = await self.request("GET", path)
            data = page.get("data") or []
            for raw in data:
                if (raw.get("metadata") or {}).get("assay_batch") == batch:
                    return self._remote(raw)
                if float(raw.get("created_at") or 0) < created_after - 3600:
                    return None
            if not page.get("has_more") or not data:
                return None
            after = str(data[-1]["id"])
        return None


class AzureOpenAIBatches(OpenAIBatches):
    """Azure OpenAI global batch: ``{resource}/openai/files`` and ``/openai/batches`` with
    ``api-version``; lines name the global-batch deployment as their ``model``."""

    provider = "azure_openai"
    default_line_url = "/chat/completions"

    def default_root(self) -> str:
        base = self.wire.base_url()
        return base.split("/openai/deployments/")[0] + "/openai"


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches API."""

    provider = "anthropic"

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": body}

    async def create(self, batch: str, path: Path, count: int) -> RemoteBatch:
        # the body is {"requests": [line, ...]}, built on disk from the lines file (never in memory twice)
        body = path.with_suffix(".body.json")
        with path.open("rb") as src, body.open("wb") as out:
            out.write(b'{"requests":[')
            for i, line in enumerate(src):
                if line.strip():
                    out.write((b"," if i else b"") + line.rstrip(b"\n"))
            out.write(b"]}")
        try:
            with body.open("rb") as f:
                created = await self.request("POST", "/messages/batches", data=f)
        finally:
            body.unlink(missing_ok=True)
        return self._remote(created)

    def _remote(self, raw: dict[str, Any]) -> RemoteBatch:
        state = str(raw.get("processing_status"))
        counts = {k: int(v) for k, v in (raw.get("request_counts") or {}).items()}
        return RemoteBatch(str(raw["id"]), state, state == "ended", counts, raw=raw)

    async def request(self, method: str, path: str, *, data: Any = None, json_body: Any = None) -> Any:
        if data is not None and json_body is None:  # a file body is JSON too
            import aiohttp

            headers = self.headers(json=True)
            self.requests += 1
            try:
                async with self.session.request(method, self.url(path), data=data, headers=headers) as resp:
                    text = await resp.text()
                    if resp.status < 400:
                        return orjson.loads(text)
                    await self._raise(resp.status, text, resp.headers.get("retry-after"))
            except aiohttp.ClientError as exc:
                raise ConnectorError(f"judge {self.name!r}: batch API unreachable: {exc}") from exc
        return await super().request(method, path, data=data, json_body=json_body)

    list_path = "/messages/batches"

    async def get(self, provider_id: str) -> RemoteBatch:
        try:
            return self._remote(await self.request("GET", f"/messages/batches/{provider_id}"))
        except NotFound as exc:
            raise await self.missing(provider_id, exc) from None

    async def cancel(self, provider_id: str) -> RemoteBatch:
        try:
            return self._remote(await self.request("POST", f"/messages/batches/{provider_id}/cancel"))
        except NotFound as exc:
            raise await self.missing(provider_id, exc) from None

    async def results(self, remote: RemoteBatch) -> AsyncIterator[LineResult]:
        url = str(remote.raw.get("results_url") or self.url(f"/messages/batches/{remote.id}/results"))
        if not url.startswith(("http://", "https://")):  # a gateway that answers a path
            from urllib.parse import urljoin

            url = urljoin(self.root + "/", url)
        try:
            async for raw in self.stream_lines(url):
                yield self._line(orjson.loads(raw))
        except NotFound as exc:
            raise await self.missing(remote.id, exc) from None

    def _line(self, item: dict[str, Any]) -> LineResult:
        cid = str(item.get("custom_id"))
        result = item.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded" and isinstance(result.get("message"), dict):
            return LineResult(cid, "done", result["message"])
        if kind == "errored":
            err = (result.get("error") or {}).get("error") or result.get("error") or {}
            etype = str(err.get("type") or "")
            message = self.secrets.redact(f"{etype}: {err.get('message') or ''}")
            return LineResult(cid, "invalid" if etype == "invalid_request_error" else "retry", error=message)
        return LineResult(cid, "retry", error=str(kind or "no result"))

    async def find(self, batch: str, created_after: float, count: int, known: set[str]) -> RemoteBatch | None:
        # Message batches carry no metadata: the one unknown batch of the same size created after
        # the ledger recorded the intent is ours (a batch id is never adopted twice). The listing
        # is newest first and shared by the workspace: page on (``after_id``) until the batches
        # are older than the intent, as other jobs may have created pages of batches since.
        matches = []
        after: str | None = None
        for _ in range(20):  # the 2,000 newest batches at most
            page = await self.request("GET", "/messages/batches?limit=100" + (f"&after_id={after}" if after else ""))
            data = page.get("data") or []
            older = False
            for raw in data:
                remote = self._remote(raw)
                if _created(raw.get("created_at")) < created_after - 5:
                    older = True
                    continue
                if remote.id not in known and sum(remote.counts.values()) == count:
                    matches.append(remote)
            if older or not page.get("has_more") or not data:
                break
            after = str(page.get("last_id") or data[-1]["id"])
        return matches[-1] if matches else None


def _created(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        import datetime as dt

        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


async def sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
