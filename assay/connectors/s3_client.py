"""Where S3 bytes live: the ``s3:`` settings, ``s3://`` URL parsing, the client and its errors.

Credentials, region and endpoint come from the standard AWS chain (``AWS_ACCESS_KEY_ID`` /
``AWS_PROFILE`` / ``AWS_ENDPOINT_URL`` / ``AWS_REGION`` in the environment, ``~/.aws/config``
profiles, instance and container roles) unless :class:`S3Config` names them. Any S3-compatible
store works through ``endpoint_url`` (MinIO, Cloudflare R2, GCS's XML interface).

>>> parse_s3_url("s3://lake/traces/dt=2026-11-21/")
S3Url(bucket='lake', key='traces/dt=2026-11-21/', pattern=None)
>>> parse_s3_url("s3://lake/traces/*.jsonl.gz").pattern
'traces/*.jsonl.gz'
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import posixpath
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.exceptions import ConfigError, ConnectorError

INSTALL_HINT = "S3 support needs aiobotocore: pip install 'assay[s3]'"
PART_SIZE = 8 << 20
"""Multipart piece size (S3 needs >= 5 MiB for every piece but the last)."""
T = TypeVar("T")


class S3Config(BaseModel):
    """The run file's ``s3:`` block. Every field defaults to the standard AWS chain.

    >>> S3Config(endpoint_url="http://127.0.0.1:9000").region is None
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str | None = Field(
        None,
        description="S3 endpoint, e.g. http://minio:9000 or https://<account>.r2.cloudflarestorage.com "
        "(default: AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3, else AWS itself).",
    )
    region: str | None = Field(None, description="Region (default: AWS_REGION / the profile's region).")
    profile: str | None = Field(None, description="A named profile of ~/.aws/config (default: AWS_PROFILE).")
    addressing_style: Literal["auto", "path", "virtual"] = Field(
        "auto", description="Bucket addressing; MinIO-like stores without wildcard DNS need 'path'."
    )
    max_pool_connections: int = Field(16, ge=1, description="HTTP connections kept open to the endpoint.")


def s3_config(options: Any) -> S3Config:
    """The run file's ``s3:`` block (a dict, an S3Config or None) as an :class:`S3Config`."""
    if options is None or isinstance(options, S3Config):
        return options or S3Config()
    try:
        return S3Config.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"s3.{where}: {first['msg']}") from exc


@dataclass(frozen=True, slots=True)
class S3Url:
    """A parsed ``s3://bucket/key`` URL; ``pattern`` is the key glob when the key has ``*?[``."""

    bucket: str
    key: str
    pattern: str | None = None

    @property
    def list_prefix(self) -> str:
        """The longest literal prefix to list."""
        if self.pattern is None:
            return self.key
        cut = min(i for i in (self.key.find(c) for c in "*?[") if i >= 0)
        return self.key[:cut]

    def matches(self, key: str) -> bool:
        """A listed key is selected by the glob (``fnmatch``; ``*`` also crosses ``/``)."""
        return self.pattern is None or fnmatch.fnmatchcase(key, self.pattern)

    def url(self, key: str | None = None) -> str:
        return f"s3://{self.bucket}/{self.key if key is None else key}"


def is_s3_url(path: str) -> bool:
    """True for ``s3://…`` paths (they select the S3 connectors without a ``type``)."""
    return path.startswith("s3://")


def parse_s3_url(url: str) -> S3Url:
    """Split ``s3://bucket/key``; a ConfigError names the URL when it is not one."""
    if not is_s3_url(url):
        raise ConfigError(f"not an s3:// URL: {url!r}")
    bucket, _, key = url[5:].partition("/")
    if not bucket:
        raise ConfigError(f"{url!r}: no bucket name")
    pattern = key if any(c in key for c in "*?[") else None
    return S3Url(bucket, key, pattern)


def is_hidden(relative_key: str) -> bool:
    """Keys with a ``_`` or ``.`` component (``_SUCCESS``, ``_dead_letter/…``, ``.tmp``) are not inputs."""
    return any(part.startswith(("_", ".")) for part in relative_key.split("/") if part)


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


_CREDENTIALS_HINT = (
    "no AWS credentials found (the standard chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
    "AWS_PROFILE or s3.profile, an instance or container role)"
)


def translate(exc: BaseException, what: str, operation: str | None = None) -> ConnectorError:
    """A botocore / aiohttp error as a ConnectorError naming the URL, the reason, and the S3
    operation that failed (``ListObjectsV2``, ``DeleteObjects``, …) when known."""
    done = f" (S3 {operation})" if operation else ""
    name = type(exc).__name__
    if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
        return ConnectorError(f"{what}: {_CREDENTIALS_HINT}{done}")
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError"):
        return ConnectorError(f"{what}: cannot reach the S3 endpoint: {exc}{done}")
    code = _error_code(exc)
    reason = {
        "NoSuchBucket": "no such bucket",
        "NoSuchKey": "no such object",
        "AccessDenied": "access denied",
        "403": "access denied",
        "404": "not found",
        "InvalidAccessKeyId": "invalid credentials",
        "SignatureDoesNotMatch": "invalid credentials",
    }.get(code)
    if reason is None:
        reason = f"{type(exc).__name__}: {exc}"
    return ConnectorError(f"{what}: {reason}{done}")


_LOADER: list[Any] = []


def _data_loader() -> Any:
    """botocore's loader of the (large) JSON API models, shared by every client of the process."""
    if not _LOADER:
        from botocore.loaders import create_loader

        _LOADER.append(create_loader())
    return _LOADER[0]


class S3Client:
    """One aiobotocore S3 client, opened with ``async with`` (no I/O in ``__init__``).

    Every call goes through :meth:`call`, which turns botocore errors into ConnectorErrors naming
    the URL. Request checksums are sent only when the API requires them, so stores that do not
    implement the newer CRC trailers (GCS, older MinIO) work too.
    """

    def __init__(self, config: S3Config | None = None) -> None:
        self.config = config or S3Config()
        self._stack: AsyncExitStack | None = None
        self.raw: Any = None

    async def __aenter__(self) -> S3Client:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        if self._stack is not None:
            return
        try:
            from aiobotocore.config import AioConfig
            from aiobotocore.session import AioSession
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(INSTALL_HINT) from exc
        cfg = self.config
        session = AioSession(profile=cfg.profile) if cfg.profile else AioSession()
        session.register_component("data_loader", _data_loader())  # parse the API models once
        botocfg = AioConfig(
            s3={"addressing_style": cfg.addressing_style},
            max_pool_connections=cfg.max_pool_connections,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 5, "mode": "standard"},
        )
        stack = AsyncExitStack()
        try:
            self.raw = await stack.enter_async_context(
                session.create_client("s3", region_name=cfg.region, endpoint_url=cfg.endpoint_url, config=botocfg)
            )
        except Exception as exc:
            await stack.aclose()
            raise ConnectorError(f"cannot create an S3 client: {type(exc).__name__}: {exc}") from exc
        self._stack = stack

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def call(self, what: str, fn: Callable[..., Awaitable[T]], /, **kwargs: Any) -> T:
        """``await fn(**kwargs)`` with errors translated (``what`` names the URL; the message
        also names the S3 operation)."""
        try:
            return await fn(**kwargs)
        except ConnectorError:
            raise
        except Exception as exc:
            raise translate(exc, what, self._operation(fn)) from exc

    def _operation(self, fn: Callable[..., Any]) -> str | None:
        """The S3 API name of a client method (``list_objects_v2`` → ``ListObjectsV2``)."""
        mapping = getattr(getattr(self.raw, "meta", None), "method_to_api_mapping", None)
        name = getattr(fn, "__name__", None)
        if isinstance(mapping, dict) and name in mapping:
            return str(mapping[name])
        return None

    async def list_objects(self, bucket: str, prefix: str) -> AsyncIterator[dict[str, Any]]:
        """Every object under ``prefix`` (``Key``, ``Size``, ``ETag``), in key order."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = await self.call(f"s3://{bucket}/{prefix}", self.raw.list_objects_v2, **kwargs)
            for obj in page.get("Contents", []):
                yield obj
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    async def exists(self, bucket: str, key: str) -> bool:
        """Whether an object has exactly this key."""
        return any([o["Key"] == key async for o in self.list_objects(bucket, key)])

    async def upload_file(self, bucket: str, key: str, path: str | os.PathLike[str], *, piece: int = PART_SIZE) -> None:
        """A local file as one object: one PutObject up to ``piece`` bytes, else a multipart upload
        in ``piece``-sized pieces (memory: one piece), aborted when it fails. The object appears
        whole or not at all."""
        url = f"s3://{bucket}/{key}"
        raw = self.raw
        size = await anyio.to_thread.run_sync(os.path.getsize, path)
        async with await anyio.open_file(path, "rb") as f:
            if size <= piece:
                await self.call(url, raw.put_object, Bucket=bucket, Key=key, Body=await f.read())
                return
            upload = await self.call(url, raw.create_multipart_upload, Bucket=bucket, Key=key)
            ids = {"Bucket": bucket, "Key": key, "UploadId": upload["UploadId"]}
            try:
                pieces: list[dict[str, Any]] = []
                while data := await f.read(piece):
                    number = len(pieces) + 1
                    out = await self.call(url, raw.upload_part, PartNumber=number, Body=data, **ids)
                    pieces.append({"PartNumber": number, "ETag": out["ETag"]})
                await self.call(url, raw.complete_multipart_upload, MultipartUpload={"Parts": pieces}, **ids)
            except BaseException:
                with (
                    anyio.CancelScope(shield=True),
                    contextlib.suppress(Exception),
                ):  # the next publish aborts leftovers too
                    await raw.abort_multipart_upload(**ids)
                raise

    async def delete_keys(self, bucket: str, keys: list[str]) -> None:
        """Delete objects (1,000 per request); a key that does not exist is not an error."""
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            dirs = [key.rpartition("/")[0] for key in chunk]
            under = "" if "" in dirs else posixpath.commonpath(dirs)
            out = await self.call(
                f"s3://{bucket}/{under}/" if under else f"s3://{bucket}/",
                self.raw.delete_objects,
                Bucket=bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
            errors = out.get("Errors") or []
            if errors:
                e = errors[0]
                raise ConnectorError(f"cannot delete s3://{bucket}/{e.get('Key')}: {e.get('Code')} {e.get('Message')}")

    async def abort_uploads(self, bucket: str, prefix: str) -> int:
        """Abort the incomplete multipart uploads under ``prefix`` (left by killed runs)."""
        out = await self.call(f"s3://{bucket}/{prefix}", self.raw.list_multipart_uploads, Bucket=bucket, Prefix=prefix)
        n = 0
        for up in out.get("Uploads", []) or []:
            await self.call(
                f"s3://{bucket}/{up['Key']}",
                self.raw.abort_multipart_upload,
                Bucket=bucket,
                Key=up["Key"],
                UploadId=up["UploadId"],
            )
            n += 1
        return n
