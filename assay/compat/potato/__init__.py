"""``potato``'s evaluator library (``potato.evaluators``) under ``assay.compat.potato``.

Change only the import line: ``from potato.evaluators import X`` →
``from assay.compat.potato.evaluators import X`` (also ``potato.evaluators.agent_as_judge`` and
potato's other sub-modules). The names are assay's evaluators (the same classes
:mod:`assay.evaluators` exports under potato's names); ``build_evaluator`` / ``list_evaluators`` /
``get_supported_evaluators`` are potato's registry (its sixteen names, a ``KeyError`` for an
unknown one). The package is not named ``potato``: it never shadows the real one.
"""
