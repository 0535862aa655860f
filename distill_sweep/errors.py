"""Errors that mean "the user asked for something impossible": reported as one line, exit code 2."""


class ConfigError(ValueError):
    """Bad configuration or input, detected before any training starts."""


class DataError(ConfigError):
    """A missing, unreachable or malformed data source."""
