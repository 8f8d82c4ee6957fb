"""The package version (a base module, so that every stage can name it)."""

__version__ = "0.1.0"
