"""Errors that mean "the user asked for something impossible": reported as one line, exit code 2."""


class ConfigError(ValueError):
    """Bad configuration or input, detected before any training starts."""


class DataError(ConfigError):
    """A missing, unreachable or malformed data source."""


class DiskWriteError(RuntimeError):
    """A file could not be written (a full disk, an I/O error): one line naming the file and what is kept, exit
    code 1. Not an OSError on purpose: handlers that tolerate a missing or unreadable file must not swallow it."""
