"""``openevals.string`` (see :mod:`assay.compat`): ``.levenshtein``, ``.embedding_similarity``."""
