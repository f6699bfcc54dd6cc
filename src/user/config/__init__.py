"""Typed, strict configuration loading shared by every config in the project."""

from user.config.describe import describe_settings
from user.config.kinds import Kind, Kinds
from user.config.plain import to_data
from user.config.sections import KindSection, NamedSections, resolve_sections
from user.config.strict import ConfigError, from_mapping, load_yaml, setting

__all__ = [
    "ConfigError",
    "Kind",
    "KindSection",
    "Kinds",
    "NamedSections",
    "describe_settings",
    "from_mapping",
    "load_yaml",
    "resolve_sections",
    "setting",
    "to_data",
]
