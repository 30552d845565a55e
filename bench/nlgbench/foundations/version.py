"""The nlgbench version: one number, read by the package, its metadata and every result."""

__version__ = "0.2.0"
