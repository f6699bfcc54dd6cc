"""The report's errors: a path that is not a run directory, plots that cannot be drawn (a CSV row that cannot be read
is the run log's `MalformedRowError`)."""

from __future__ import annotations


class ReportError(RuntimeError):
    """Base class of the report's errors."""


class NotARunDirectoryError(ReportError):
    """The path given is not a run directory (missing, a file, or none of a run's files in it)."""


class PlotsUnavailableError(ReportError):
    """matplotlib (the `learn` extra) cannot be imported: the report has no plots."""
