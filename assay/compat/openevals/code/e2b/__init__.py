"""``openevals.code.e2b`` without E2B (see :mod:`assay.compat`): ``.execution`` runs the code in
assay's local sandbox (``code_execution``); ``.pyright`` type-checks locally."""
