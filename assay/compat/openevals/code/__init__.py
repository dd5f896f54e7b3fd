"""``openevals.code`` (see :mod:`assay.compat`): ``.pyright``, ``.mypy``, ``.llm``, ``.e2b``."""
