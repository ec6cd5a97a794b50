"""Exit codes of the ``coppice`` client verbs: one per kind of failure, for scripts to branch on.

``3`` is taken by ``coppice serve`` (the server could not start), so the client's own
failures start at 4.
"""

from __future__ import annotations

from coppice import errors

OK = 0
FAILED = 1
USAGE = 2
NOT_FOUND = 4
INVALID = 5
CONFLICT = 6
AUTH = 7
UNREACHABLE = 8
JOB_FAILED = 9
JOB_CANCELLED = 10
INTERRUPTED = 130
STDOUT_CLOSED = 141  # 128 + SIGPIPE, as a shell reports a command that wrote to a closed pipe

EXIT_CODES_HELP = """exit codes:
  0    success
  1    the server failed (5xx), or another error
  2    bad command-line arguments
  4    not found (unknown dataset, job, model, search or registered name)
  5    refused as invalid (400, 413, 415, 422), or an unreadable input file
  6    conflict with the resource's state (409), e.g. cancelling a finished job
  7    no API key, or one without the rights (401, 403)
  8    server unreachable, or not ready (503)
  9    the job or search failed (train --wait, jobs wait, search start --wait)
  10   the job or search was cancelled
  130  interrupted (Ctrl-C; a job or search being waited for is cancelled on the server)
  141  the output was closed early (e.g. piped into head)"""

_BY_CLASS: list[tuple[type[BaseException], int]] = [
    (errors.NotFoundError, NOT_FOUND),
    (errors.ConflictError, CONFLICT),
    (errors.AuthenticationError, AUTH),
    (errors.PermissionDeniedError, AUTH),
    (errors.ServiceUnavailableError, UNREACHABLE),
    (errors.ConnectionFailedError, UNREACHABLE),
    (errors.ClientError, INVALID),
    (errors.JobFailedError, JOB_FAILED),
    (errors.SearchFailedError, JOB_FAILED),
    (errors.JobCancelledError, JOB_CANCELLED),
    (errors.CoppiceError, FAILED),
    (KeyboardInterrupt, INTERRUPTED),
    (TimeoutError, FAILED),  # before OSError, of which it is a subclass
    # Input files the command reads: missing, unreadable, malformed.
    (OSError, INVALID),
    (ValueError, INVALID),
]


def exit_code_of(error: BaseException) -> int | None:
    """The exit code for ``error``; ``None`` for an unexpected one (a bug: let it raise)."""
    for kind, code in _BY_CLASS:
        if isinstance(error, kind):
            return code
    return None
