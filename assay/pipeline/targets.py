"""Where a run's outputs go and under which names, as the connectors say (the engine reads none of
their fields): the sink's identity (its checkpoint key), the dead-letter default beside the
results, the local summary path, and whether processes scale by a consumer group."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.layout import SUMMARY
from assay.paths import safe_join
from assay.pipeline.checkpoint import CheckpointStore
from assay.processes import pid_alive


def sink_url(config: RunConfig) -> str:
    """What tells the run's sink from every other (a path, a URL, or its whole section)."""
    return registry.sink_identity(config.sink)


def dead_letter_of(config: RunConfig) -> Any:
    """The dead-letter section, or its default: beside the results as the sink's connector says,
    else a directory under ``state_dir``."""
    if config.dead_letter is not None:
        return config.dead_letter
    return registry.default_dead_letter(config.sink, config.state_dir, CheckpointStore.key_for(sink_url(config)))


def scales_by_group(config: RunConfig) -> bool:
    """Whether processes running this run file side by side share nothing but a consumer group (a
    Kafka source in a group writing Kafka topics). Such processes take no run lock and each keeps
    its own checkpoint (the group's committed offsets are where a rerun resumes); any other run
    writes outputs that one process at a time may own."""
    return registry.scales_by_group(config.source, [config.sink, dead_letter_of(config)])


def member_key(state_dir: str | Path, key: str) -> str:
    """This process's own checkpoint key under the run's ``key`` (``<key>/members/<host>-<pid>``);
    the checkpoints of members of this host that died (kill -9) are removed on the way."""
    host = socket.gethostname()
    members = safe_join(Path(state_dir), "checkpoints", key, "members")
    if members.is_dir():
        for d in members.iterdir():
            name, _, pid = d.name.rpartition("-")
            if name == host and pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)
    return f"{key}/members/{host}-{os.getpid()}"


def local_summary_path(config: RunConfig) -> Path:
    """Where a run's ``_SUMMARY.json`` is on local disk: where the sink's connector puts it
    (beside a directory's parts, ``out.jsonl._SUMMARY.json`` beside a file), else ``summary_path``
    or ``<state_dir>/summaries/<sink key>/`` (Kafka; an S3 sink's summary is an object)."""
    beside = registry.summary_path(config.sink)
    if beside is not None:
        return beside
    if config.summary_path:
        return Path(config.summary_path)
    return safe_join(Path(config.state_dir), "summaries", CheckpointStore.key_for(sink_url(config)), SUMMARY)


def results_location(config: RunConfig) -> str | Path:
    """Where a run's summaries are, and ``assay merge --run-file`` looks for the shards' ones: the
    sink's ``s3://`` prefix, else the local directory of its summary."""
    sink_path = str(getattr(config.sink, "path", "") or "")
    return sink_path if "://" in sink_path else local_summary_path(config).parent


__all__ = ["dead_letter_of", "local_summary_path", "member_key", "results_location", "scales_by_group", "sink_url"]
