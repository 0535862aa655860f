"""Errors that mean "the user asked for something impossible": reported as one line, exit code 2."""


class ConfigError(ValueError):
    """Bad configuration or input, detected before any training starts."""


class DataError(ConfigError):
    """A missing, unreachable or malformed data source."""


class DiskWriteError(RuntimeError):
    """A file could not be written (a full disk, an I/O error): one line naming the file and what is kept, exit
    code 1. Not an OSError on purpose: handlers that tolerate a missing or unreadable file must not swallow it."""


class NonFiniteLossError(RuntimeError):
    """The loss or the gradient became NaN/inf: training cannot continue meaningfully. Here, not in the training
    loop, so the command line reports it in one line without importing torch."""


def failure_line(err: BaseException) -> str:
    """A job's failure as the one line the command line prints: what happened and what a re-run does."""
    if isinstance(err, NonFiniteLossError):
        return (f"{err}: the run diverged (a learning rate or a loss weight too high for this model) or a model "
                "holds non-finite weights; the record says failed and the job keeps its last checkpoint, from which "
                "the same command resumes (skip_nonfinite=true skips such steps, as a new job)")
    return str(err)
