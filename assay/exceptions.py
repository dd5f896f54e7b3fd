"""The one exception root of assay.

Every error assay raises on purpose derives from :class:`AssayError`; third-party errors are
translated at the boundary with ``raise ... from``::

    AssayError
    ├── ConfigError            bad run file, bad CLI usage, bad evaluator params (exit code 2)
    │   ├── UnknownEvaluatorError
    │   └── JudgeAuthError     a judge answered 401/403: the key is wrong (stops the run)
    ├── NormalizationError     a record that cannot be turned into a canonical Trace (a Failure row)
    ├── EvaluatorError         an evaluator could not score a trace (kept as an error Result)
    ├── JudgeError             an LLM judge call failed
    │   ├── JudgeRequestError  the provider rejected the request (4xx other than 429): never retried
    │   ├── JudgeRetryableError  429, 5xx, timeouts, connection resets: retried with backoff
    │   └── VerdictParseError  the judge answered but no verdict could be salvaged
    ├── ConnectorError         a source or sink failed (infrastructure: exit code 1)
    │   └── JudgeUnavailableError  a judge endpoint is unreachable or failing (circuit open)
    ├── BudgetExceeded         the run's budget_usd was reached (exit code 5, resumable)
    ├── QualityGateFailed      a threshold gate failed (exit code 3)
    └── RunLockedError         the same run (run file, --ds, shard) is already running (exit code 6)
"""

from __future__ import annotations


class AssayError(Exception):
    """Root of every error assay raises on purpose."""

    exit_code: int = 1


class ConfigError(AssayError):
    """A run file, CLI option or evaluator parameter is invalid.

    The message names the file, the key and the reason.
    """

    exit_code = 2


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

    exit_code = 5


class QualityGateFailed(AssayError):
    """A configured quality gate (threshold) failed."""

    exit_code = 3


class RunLockedError(AssayError):
    """The same run (run file, ``--ds``, shard) is already running in another process."""

    exit_code = 6
