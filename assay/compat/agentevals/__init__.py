"""``agentevals`` import paths (see :mod:`assay.compat`): ``assay.compat.agentevals.trajectory``."""
