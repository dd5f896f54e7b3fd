"""The key of an output under the run's ``state_dir``: checkpoints, staged lake rows, batch ledgers
and the summaries of a sink without a directory are kept under a name derived from the sink's URL
(an absolute path for a local one), so two runs writing to different places never share state.

>>> SinkKey.key_for("s3://lake/scores/") == SinkKey.key_for("s3://lake/scores/")
True
>>> len(SinkKey.key_for("out/", "shard-0-of-2"))
16
"""

from __future__ import annotations

import hashlib
import os


class SinkKey:
    """:meth:`key_for` is the engine's ``CheckpointStore.key_for`` (the checkpoints' directory name)
    and names the lake connectors' staging directories."""

    @staticmethod
    def key_for(sink_url: str, scope: str = "") -> str:
        """16 hex digits of the sink's URL (absolute for a local path) and ``scope`` (a shard)."""
        target = sink_url if "://" in sink_url else os.path.abspath(sink_url)
        return hashlib.sha256((target + scope).encode()).hexdigest()[:16]
