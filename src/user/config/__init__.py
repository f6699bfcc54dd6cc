"""Typed, strict configuration loading shared by every config in the project."""

from user.config.strict import ConfigError, describe_settings, from_mapping, load_yaml, setting

__all__ = ["ConfigError", "describe_settings", "from_mapping", "load_yaml", "setting"]
