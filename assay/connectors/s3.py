"""S3 connectors (extra ``assay[s3]``): :class:`S3Source`, :class:`S3Sink` and their settings.

>>> from assay.connectors.s3 import S3Source, S3Sink, S3Config
>>> S3Sink.dead_letter("s3://lake/scores/dt=2026-11-21").url
's3://lake/scores/dt=2026-11-21/_dead_letter/'

The modules split where the bytes live (:mod:`~assay.connectors.s3_client`), reading
(:mod:`~assay.connectors.s3_source`) and writing (:mod:`~assay.connectors.s3_sink`).
"""

from assay.connectors.s3_client import S3Config, S3Url, is_s3_url, parse_s3_url
from assay.connectors.s3_sink import S3Sink
from assay.connectors.s3_source import S3Source

__all__ = ["S3Config", "S3Sink", "S3Source", "S3Url", "is_s3_url", "parse_s3_url"]
