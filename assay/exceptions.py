"""The one exception root of assay.

Every error assay raises on purpose derives from :class:`AssayError`; third-party errors are
translated at the boundary with ``raise ... from``::

    AssayError
    ├── ConfigError            bad run file, bad CLI usage, bad evaluator params (exit code 2)
    │   ├── UnknownEvaluatorError
    │   ├── JudgeAuthError     a judge answered 401/403: the key is wrong (stops the run)
    │   └── PushAuthError      a push target answered 401/403 or has no key (exit code 2)
    ├── NormalizationError     a record that cannot be turned into a canonical Trace (a Failure row)
    ├── EvaluatorError         an evaluator could not score a trace (kept as an error Result)
    ├── JudgeError             an LLM judge call failed
    │   ├── JudgeRequestError  the provider rejected the request (4xx other than 429): never retried
    │   ├── JudgeRetryableError  429, 5xx, timeouts, connection resets: retried with backoff
    │   └── VerdictParseError  the judge answered but no verdict could be salvaged
    ├── ConnectorError         a source or sink failed (infrastructure: exit code 1)
    │   ├── InputMissingError  the input is not there (yet): a partition not landed (exit code 1)
    │   ├── JudgeUnavailableError  a judge endpoint is unreachable or failing (circuit open)
    │   └── PushUnreachableError  a push target (LangSmith, Langfuse, …) is unreachable (exit code 1)
    ├── BudgetExceeded         the run's budget_usd was reached (exit code 5, resumable)
    ├── QualityGateFailed      a threshold gate failed (exit code 3)
    └── RunLockedError         the same run (run file, --ds, shard) is already running (exit code 6)

The process exit codes (``assay run``, ``assay merge``) live here too, beside the exceptions that
carry most of them; :mod:`assay.pipeline.verdict` decides which one a run ends with.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INFRA = 1
"""Infrastructure failure (a source, sink or judge unreachable, a missing input): retryable."""
EXIT_CONFIG = 2
"""Bad run file or usage: fix the config, a retry cannot help."""
EXIT_GATE = 3
"""A quality gate failed on a whole output."""
EXIT_DEAD_LETTERS = 4
"""Dead letters above ``limits.max_dead_letters`` / ``max_dead_letter_ratio``."""
EXIT_BUDGET = 5
"""The run's budget was reached; the same command resumes."""
EXIT_LOCKED = 6
"""The same run (run file, ``--ds``, shard) is already running."""
EXIT_PENDING = 75
"""The work is submitted and not finished yet (a provider's batch API): run the same command
again later to collect it (75 is ``EX_TEMPFAIL`` of sysexits.h)."""
EXIT_INTERRUPTED = 130
"""Stopped by SIGINT/SIGTERM; the same command resumes."""


class AssayError(Exception):
    """Root of every error assay raises on purpose."""

    exit_code: int = EXIT_INFRA


class ConfigError(AssayError):
    """A run file, CLI option or evaluator parameter is invalid.

    The message names the file, the key and the reason.
    """

    exit_code = EXIT_CONFIG


class UnknownEvaluatorError(ConfigError, KeyError):
    """No evaluator is registered under that name."""

    def __str__(self) -> str:  # KeyError quotes its message; we do not want that
        return str(self.args[0]) if self.args else ""


class NormalizationError(AssayError):
    """A record could not be normalized into a canonical Trace."""


class EvaluatorError(AssayError):
    """An evaluator could not score a trace."""


class JudgeError(EvaluatorError):
    """An LLM judge call failed."""


class JudgeRequestError(JudgeError):
    """The provider rejected the request (a 4xx other than 429); never retried."""


class JudgeRetryableError(JudgeError):
    """A transient judge failure: 429, 5xx, timeout or connection reset."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class VerdictParseError(JudgeError):
    """The judge answered, but no verdict could be salvaged from its output."""

    def __init__(self, message: str, *, raw: str = ""):
        super().__init__(message)
        self.raw = raw


class ConnectorError(AssayError):
    """A source or sink failed (infrastructure)."""


class InputMissingError(ConnectorError):
    """The input is not there: no such file or directory, a glob or a directory that holds no
    input, an ``s3://`` prefix with no objects. Usually a partition that has not landed yet, so
    it is an infrastructure failure (exit code 1) a scheduler retries, whether the input is local
    or in S3; the message names the path."""


class JudgeAuthError(ConfigError):
    """A judge endpoint answered 401 or 403: the API key (or its permissions) is wrong.

    Raised once, with the provider's message (secrets redacted); every later call to that endpoint
    fails at once with the same error instead of sending. It stops the run (exit code 2)."""


class JudgeUnavailableError(ConnectorError):
    """A judge endpoint could not be reached, or failed every request, once the retry budget was
    spent (the endpoint's circuit breaker is open). Later calls fail at once with this error
    instead of retrying per trace. It stops the run (exit code 1)."""


class BudgetExceeded(AssayError):
    """The run's budget was reached; the run stopped cleanly and can be resumed."""

    exit_code = EXIT_BUDGET


class QualityGateFailed(AssayError):
    """A configured quality gate (threshold) failed."""

    exit_code = EXIT_GATE


class RunLockedError(AssayError):
    """The same run (run file, ``--ds``, shard) is already running in another process."""

    exit_code = EXIT_LOCKED


class PushUnreachableError(ConnectorError):
    """A push target did not answer (or kept failing) after its retry budget; the output stays
    published and the same ``assay push`` finishes the push."""


class PushAuthError(ConfigError):
    """A push target refused the key (401/403) or no key is set: the push stops at once."""
