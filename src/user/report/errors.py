"""The report's errors: a path that is not a run directory, and a CSV row that cannot be read."""

from __future__ import annotations


class ReportError(RuntimeError):
    """Base class of the report's errors."""


class NotARunDirectoryError(ReportError):
    """The path given is not a run directory (missing, a file, or none of a run's files in it)."""


class MalformedRowError(ReportError, ValueError):
    """A row of a run's CSV file that cannot be read; the message names the file, the line and the column."""


class PlotsUnavailableError(ReportError):
    """matplotlib (the `learn` extra) cannot be imported: the report has no plots."""
