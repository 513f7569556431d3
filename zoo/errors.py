"""The project's exceptions, importable from every layer (no TensorFlow, no other zoo import).

Entry points turn ``ConfigError`` into one line on stderr and exit code 2.
"""


class ConfigError(ValueError):
    """A configuration value is wrong; the message says which value and what is allowed."""


class CorpusError(ConfigError):
    """A corpus file is missing, unreadable or holds nothing usable; the message says which and why."""


class CorpusNotFoundError(CorpusError):
    """No corpus file where one was looked for; the message lists the places and how to get one."""
