"""Integrations with schedulers. Each lives in its own module behind its own extra and is imported
explicitly (``from assay.integrations.airflow import AssayRunOperator``), never from here."""

__all__: list[str] = []
