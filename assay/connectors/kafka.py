"""The Kafka connector's registry entry (``type: kafka``, extra ``assay[kafka]``).

It builds :class:`~assay.connectors.kafka_source.KafkaSource` and
:class:`~assay.connectors.kafka_sink.KafkaSink`; what the three share (the run-file models, the
client settings, the resume state's shape) is in :mod:`assay.connectors.kafka_config`, which the
source and the sink import (not this module), and is importable from here as before.
"""

from __future__ import annotations

from typing import Any

from assay.connectors.kafka_config import Done, Offsets
from assay.connectors.kafka_config import KafkaConnection as KafkaConnection
from assay.connectors.kafka_config import KafkaSinkConfig as KafkaSinkConfig
from assay.connectors.kafka_config import KafkaSourceConfig as KafkaSourceConfig
from assay.connectors.kafka_config import client_kwargs as client_kwargs
from assay.connectors.kafka_config import continues as continues
from assay.connectors.kafka_config import offsets_state as offsets_state
from assay.connectors.kafka_config import quiet_client_logs as quiet_client_logs
from assay.connectors.kafka_config import require_aiokafka as require_aiokafka
from assay.connectors.kafka_config import resume_done as resume_done
from assay.connectors.kafka_config import resume_offsets as resume_offsets
from assay.connectors.registry import BaseConnector


class KafkaConnector(BaseConnector):
    """The registry entry (``type: kafka``): a consumer-group source and an ``acks=all`` sink
    (also the dead-letter role: the original bytes with headers).

    Processes writing only to Kafka topics scale side by side in one group; their resume state is
    the group's committed offsets. A run writing files or S3 owns its input: each writer reads a
    fixed share of the partitions and its checkpoint holds the offsets its rows cover, which a
    resume (with any number of writers) continues from."""

    source_config = KafkaSourceConfig
    sink_config = KafkaSinkConfig

    def sink_identity(self, config: Any) -> str:
        return f"kafka://{','.join(config.servers())}/{config.topic}"

    def merge_resume_states(self, states: Any) -> Any:
        """Per partition the furthest offset any writer made durable (a partition is read by one
        writer at a time, and an offset only grows), and the first offset the run read."""
        merged: Offsets = {}
        origin: Offsets = {}
        done: Done = {}
        cont = False
        for state in states:
            for key, offset in resume_offsets(state).items():
                merged[key] = max(offset, merged.get(key, offset))
            for key, offset in resume_offsets(state, "origin").items():
                origin[key] = min(offset, origin.get(key, offset))
            for key, found in resume_done(state).items():  # every writer's durable rows stay
                done[key] = [*done.get(key, []), *found]
            cont = cont or continues(state)
        return offsets_state(merged, origin, done, cont=cont)

    def restart_state(self, state: Any) -> Any:
        """A start-over (``--fresh``, a changed run file) reads again from where the run began: the
        records it read before are committed to the group and would not come again."""
        origin = resume_offsets(state, "origin")
        return offsets_state(origin, origin, cont=continues(state))

    def rerun_state(self, config: Any) -> Any:
        """The same command again beside the whole output it completed: continue from the group's
        committed offsets (where that output ends), whatever ``start``/``from_time`` say; with
        nothing new the output stays as it is."""
        return offsets_state({}, cont=True)

    def joins_group(self, config: Any) -> bool:
        return bool(config.assignment == "group")

    def appends_only(self, config: Any) -> bool:
        return True

    def build_source(self, config: Any, ctx: Any) -> Any:
        from assay.connectors.kafka_source import KafkaSource

        # --workers N / --shard: processes writing Kafka topics are consumers of one group (Kafka
        # splits the partitions); a run that owns its output (files, S3) takes a fixed share, as
        # ``assignment: manual`` does
        return KafkaSource(
            config,
            batch_size=ctx.batch_size,
            resume_state=ctx.resume_state if ctx.owns_input else None,
            shard=ctx.shard,
            fixed_share=ctx.owns_input,
        )

    def build_sink(self, config: Any, ctx: Any) -> Any:
        from assay.connectors.kafka_sink import KafkaSink
        from assay.connectors.registry import PUBLISHER

        # the sink the engine opens to publish the summary has nothing to send
        return KafkaSink(config, connect=getattr(ctx, "shard", 0) != PUBLISHER)


CONNECTOR = KafkaConnector()
