"""Kafka connectors (extra ``assay[kafka]``, aiokafka): the run-file models and the client settings.

The classes live in :mod:`assay.connectors.kafka_source` (:class:`KafkaSource`) and
:mod:`assay.connectors.kafka_sink` (:class:`KafkaSink`, which also serves the dead-letter role),
the registry entry in :mod:`assay.connectors.kafka`; this module holds what they share: the frozen
config models, the translation of the security settings into aiokafka keyword arguments and the
resume state's shape. aiokafka is imported only when a connector opens.

>>> cfg = KafkaSourceConfig(bootstrap_servers="b1:9092,b2:9092", topics=["traces"], group_id="nightly")
>>> cfg.servers()
['b1:9092', 'b2:9092']
>>> KafkaSinkConfig(bootstrap_servers=["b1:9092"], topic="scores").compression
'none'
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from assay.connectors.base import ConnectorConfig
from assay.exceptions import ConfigError, ConnectorError

__all__ = [
    "KafkaConnection",
    "KafkaSinkConfig",
    "KafkaSourceConfig",
    "client_kwargs",
    "quiet_client_logs",
    "require_aiokafka",
]

INSTALL_HINT = "the Kafka connectors need aiokafka (pip install 'assay[kafka]')"


class KafkaConnection(BaseModel):
    """How to reach the cluster: servers, identity, TLS and SASL (shared by source and sink)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str | list[str]
    """``"host:port,host:port"`` or a list of ``host:port``."""
    client_id: str = "assay"
    """The client id the brokers see (quotas, logs)."""
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """Transport: plain, TLS, SASL over plain, SASL over TLS."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"] | None = None
    """SASL mechanism (with ``SASL_PLAINTEXT``/``SASL_SSL``)."""
    sasl_plain_username: str | None = None
    """SASL user name (PLAIN, SCRAM)."""
    sasl_plain_password_env: str | None = None
    """Name of the environment variable holding the SASL password (never the password itself)."""
    ssl_cafile: str | None = None
    """CA bundle that signed the brokers' certificates (default: the system store)."""
    ssl_certfile: str | None = None
    """Client certificate (mutual TLS)."""
    ssl_keyfile: str | None = None
    """Client private key (mutual TLS)."""
    connect_timeout_s: float = Field(15.0, gt=0)
    """How long opening may take before an unreachable cluster is an error (never a hang), and how
    long the cluster may be out of reach mid-run (no connection to any broker while records are
    awaited or delivered) before the run ends with one error naming it."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _non_empty(cls, v: str | list[str]) -> str | list[str]:
        servers = [s.strip() for s in (v.split(",") if isinstance(v, str) else v) if s.strip()]
        if not servers:
            raise ValueError("bootstrap_servers is empty")
        return v

    def servers(self) -> list[str]:
        """The bootstrap servers as a list."""
        raw = self.bootstrap_servers.split(",") if isinstance(self.bootstrap_servers, str) else self.bootstrap_servers
        return [s.strip() for s in raw if s.strip()]


class KafkaSourceConfig(KafkaConnection, ConnectorConfig):
    """``source: {type: kafka, …}``: read traces from topics with a consumer group.

    Offsets are committed (auto-commit off) per partition up to the watermark of durable results.
    """

    type: Literal["kafka"] = "kafka"
    topics: list[str] | None = None
    """Topics to read (or ``topic_pattern``)."""
    topic_pattern: str | None = None
    """A regular expression of topics to read (instead of ``topics``)."""
    group_id: str
    """Consumer group: its committed offsets are the checkpoint; processes sharing it split the partitions."""
    start: Literal["committed", "earliest", "latest"] = "committed"
    """Where a partition starts: the group's committed offset (earliest for a new group), the
    beginning, or the end. ``earliest``/``latest`` apply to the partitions of the first assignment;
    partitions handed over later resume from the committed offsets, and so does the same command
    run again beside the whole output it completed (``--fresh`` applies ``start`` again)."""
    stop_at: Literal["end", "never"] = "end"
    """``end``: stop each partition at its end offset when the run starts (cron, backfill);
    ``never``: keep consuming until stopped."""
    from_time: datetime | None = None
    """Start at the first offset whose timestamp is at or after this time (overrides ``start``)."""
    until_time: datetime | None = None
    """Stop each partition at the first record whose timestamp is after this time."""
    max_poll_records: int = Field(2048, ge=1)
    """Records taken from the consumer per poll (a poll becomes one or more batches)."""
    max_buffered_batches: int = Field(8, ge=1)
    """Batches buffered ahead of the pipeline; beyond that partitions are paused (backpressure)."""
    poll_timeout_ms: int = Field(200, ge=1)
    """How long one poll waits for records."""
    assignment: Literal["group", "manual"] = "group"
    """``group``: join the consumer group, which splits the partitions among the processes sharing
    ``group_id`` and moves them when a process comes or goes (rebalances). ``manual``: no group
    join (no join delay, no rebalances): this process reads every partition of the topics, or with
    ``--workers N``/``--shard i/N`` every N-th one; offsets are still committed to ``group_id``.
    For batch runs with a fixed set of processes; no group member may use ``group_id`` meanwhile."""
    session_timeout_ms: int = Field(10_000, ge=1000)
    """The group drops a consumer that sent no heartbeat for this long (heartbeats run in aiokafka's
    background task, so only an event loop blocked this long evicts). Apache Kafka accepts 6000 to
    1800000 by default (``group.min/max.session.timeout.ms``). It also sets how long tansu holds a
    JoinGroup: until half of it passed, in whole seconds (3 s at 6000, 5 s at 10,000; the group
    keeps the value of the request that created it); Apache Kafka's join wait is the broker's
    ``group.initial.rebalance.delay.ms`` instead (docs/kafka.md, *Brokers*)."""
    rebalance_timeout_ms: int | None = Field(None, ge=1000)
    """How long a rebalance waits for every member to rejoin (each first flushes and commits what is
    durable, waiting at most half of this for the records of its revoked partitions still being
    scored); default: ``session_timeout_ms``."""
    max_poll_interval_ms: int = Field(300_000, ge=1000)
    """The consumer leaves the group when it did not poll for this long; the source keeps polling
    while partitions are paused, so a slow judge never reaches it."""
    fetch_max_bytes: int = Field(52_428_800, ge=1024)
    """Upper bound of one fetch response."""
    max_partition_fetch_bytes: int = Field(4_194_304, ge=1024)
    """Upper bound of one partition's data in a fetch response."""

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaSourceConfig:
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError("give exactly one of 'topics' (a non-empty list) or 'topic_pattern'")
        return self

    @field_validator("from_time", "until_time")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        return v.replace(tzinfo=UTC) if v is not None and v.tzinfo is None else v


class KafkaSinkConfig(KafkaConnection, ConnectorConfig):
    """``sink: {type: kafka, …}`` (or ``dead_letter``): one message per row, keyed by the trace id.

    The producer waits for all in-sync replicas (``acks=all``); ``flush`` returns once every
    message sent so far is confirmed, which is when the engine acknowledges the source.
    """

    type: Literal["kafka"] = "kafka"
    topic: str
    """The topic the rows (or dead letters) go to."""
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    """Producer compression of record batches (snappy, lz4, zstd need ``pip install cramjam``)."""
    linger_ms: int = Field(20, ge=0)
    """How long the producer waits to fill a batch of dead letters (sent one by one); result rows
    go out at once in the record batches each ``write_batch`` builds."""
    max_batch_bytes: int = Field(1_048_576, ge=1024)
    """Upper bound of one record batch per partition."""
    max_request_size: int = Field(10_485_760, ge=1024)
    """Upper bound of one produce request (and so of one message)."""
    enable_idempotence: bool | Literal["auto"] = "auto"
    """Idempotent producer (no duplicates from producer retries). ``auto``: on when the broker
    supports it (some Kafka-compatible brokers reject aiokafka's InitProducerId), else off with
    a warning; delivery stays at-least-once either way."""


def require_aiokafka() -> None:
    """Raise a ConfigError with the install hint when aiokafka is missing; route aiokafka's log
    records through assay's logging (:class:`_OnceEach`: only with ``assay run --verbose``)."""
    try:
        import aiokafka  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ConfigError(INSTALL_HINT) from e
    client_log = logging.getLogger("aiokafka")
    if not client_log.handlers:  # unless the application configured aiokafka's logging itself
        client_log.addHandler(_OnceEach())
        client_log.propagate = False


def quiet_client_logs(quiet: bool = True) -> None:
    """Stop (or resume) passing aiokafka's log records on: once a run has said in one line which
    cluster it could not reach, closing the clients makes aiokafka log every request it abandons."""
    _OnceEach.quiet = quiet


class _OnceEach(logging.Handler):
    """aiokafka's warnings and errors, logged again under ``assay.kafka.*`` (so they take the
    run's log format and redaction) when that logger is enabled for DEBUG (``assay run
    --verbose``), each distinct message once: a broker that went away makes aiokafka repeat the
    same few messages at every reconnect attempt, and what they say (a node not reachable, a
    metadata update failed) is what the run's one error line says. Never a traceback (the
    records' ``exc_info`` is dropped), and nothing while :func:`quiet_client_logs` is on."""

    quiet = False

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._seen: set[tuple[str, int, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if _OnceEach.quiet or not logging.getLogger("assay.kafka").isEnabledFor(logging.DEBUG):
            return
        message = record.getMessage()
        key = (record.name, record.levelno, message)
        if key in self._seen:
            return
        if len(self._seen) < 10_000:
            self._seen.add(key)
        logging.getLogger(f"assay.kafka.{record.name}").log(record.levelno, "%s", message)


def client_kwargs(cfg: KafkaConnection) -> dict[str, Any]:
    """aiokafka keyword arguments for servers, client id, TLS and SASL."""
    kw: dict[str, Any] = {
        "bootstrap_servers": cfg.servers(),
        "client_id": cfg.client_id,
        "security_protocol": cfg.security_protocol,
        # a JoinGroup request may be held by the broker for up to a rebalance (or session) timeout
        "request_timeout_ms": max(40_000, _join_hold_ms(cfg) + 10_000),
    }
    if cfg.security_protocol in ("SSL", "SASL_SSL") or cfg.ssl_cafile or cfg.ssl_certfile:
        from aiokafka.helpers import create_ssl_context

        kw["ssl_context"] = create_ssl_context(
            cafile=cfg.ssl_cafile, certfile=cfg.ssl_certfile, keyfile=cfg.ssl_keyfile
        )
    if cfg.security_protocol.startswith("SASL"):
        kw["sasl_mechanism"] = cfg.sasl_mechanism or "PLAIN"
        if cfg.sasl_plain_username is not None:
            kw["sasl_plain_username"] = cfg.sasl_plain_username
        if cfg.sasl_plain_password_env is not None:
            password = os.environ.get(cfg.sasl_plain_password_env)
            if password is None:
                raise ConfigError(
                    f"kafka: sasl_plain_password_env names {cfg.sasl_plain_password_env!r}, which is not set"
                )
            kw["sasl_plain_password"] = password
    return kw


def _join_hold_ms(cfg: KafkaConnection) -> int:
    if not isinstance(cfg, KafkaSourceConfig):
        return 0
    return max(cfg.session_timeout_ms, cfg.rebalance_timeout_ms or 0)


class ClusterUnreachable(ConnectorError):
    """The cluster could not be reached in time (never there, or gone mid-run)."""


_GONE: dict[tuple[str, ...], ClusterUnreachable] = {}
"""Clusters (by bootstrap servers) a connector of this process found out of reach: the others
give up on them at once instead of each waiting out its own timeout."""


def unreachable(cfg: KafkaConnection, what: str, err: BaseException | None = None) -> ConnectorError:
    """The error for a cluster that could not be reached in time, naming the servers (the cluster
    is then known to be gone: :func:`gone`)."""
    why = f": {type(err).__name__}: {err}" if err is not None else f" within {cfg.connect_timeout_s:g} s"
    error = ClusterUnreachable(f"kafka {what}: cannot reach bootstrap servers {','.join(cfg.servers())}{why}")
    _GONE.setdefault(tuple(cfg.servers()), error)
    return error


def gone(cfg: KafkaConnection) -> ClusterUnreachable | None:
    """The error of a connector of this process that found ``cfg``'s cluster out of reach, if one did."""
    return _GONE.get(tuple(cfg.servers()))


def reachable_again(cfg: KafkaConnection) -> None:
    """A connector opened on ``cfg``'s cluster: it is there (again)."""
    _GONE.pop(tuple(cfg.servers()), None)


def to_millis(t: datetime) -> int:
    """A timezone-aware datetime as Kafka's epoch milliseconds."""
    return int(t.timestamp() * 1000)


Offsets = dict[tuple[str, int], int]
Done = dict[tuple[str, int], list[int]]


def resume_offsets(state: Any, field: str = "offsets") -> Offsets:
    """Per partition the offsets of a Kafka source's resume state: ``offsets`` (where the
    contiguous prefix of durable rows ends: reading resumes there) or ``origin`` (where this run
    began reading: a start-over reads from there). JSON lists ``[[topic, partition, offset], …]``;
    empty for none."""
    rows = state.get(field) if isinstance(state, dict) else None
    return {(str(t), int(p)): int(o) for t, p, o in rows or ()}


def resume_done(state: Any) -> Done:
    """Per partition the offsets after ``offsets`` whose rows are durable too (``done``: batches
    written out of order, beyond a batch still in flight at the checkpoint): a resume reads from
    ``offsets`` and skips these, so no offset is written twice. JSON ``[[topic, partition,
    [[first, end), …]], …]``."""
    rows = state.get("done") if isinstance(state, dict) else None
    out: Done = {}
    for t, p, ranges in rows or ():
        out[(str(t), int(p))] = [o for lo, hi in ranges for o in range(int(lo), int(hi))]
    return out


def continues(state: Any) -> bool:
    """Whether partitions without a resume offset start at the group's committed offsets whatever
    ``start``/``from_time`` say (the same command again beside a whole output: it continues where
    that output ends)."""
    return isinstance(state, dict) and bool(state.get("continue"))


def _ranges(offsets: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for o in sorted(set(offsets)):
        if out and out[-1][1] == o:
            out[-1][1] = o + 1
        else:
            out.append([o, o + 1])
    return out


def offsets_state(
    offsets: Offsets, origin: Offsets | None = None, done: Done | None = None, *, cont: bool = False
) -> dict[str, Any] | None:
    """A resume state holding these offsets (JSON lists, since topic names are keys too); ``done``
    beyond ``offsets`` are kept only past each partition's offset."""
    if not offsets and not origin and not cont:
        return None
    state: dict[str, Any] = {"offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())]}
    if origin:
        state["origin"] = [[t, p, o] for (t, p), o in sorted(origin.items())]
    beyond = {
        key: _ranges([o for o in found if o >= offsets.get(key, 0)]) for key, found in sorted((done or {}).items())
    }
    if any(beyond.values()):
        state["done"] = [[t, p, r] for (t, p), r in beyond.items() if r]
    if cont:
        state["continue"] = True
    return state
