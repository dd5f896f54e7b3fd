"""``openevals.string`` (see :mod:`assay.compat`): ``.embedding_similarity``."""
