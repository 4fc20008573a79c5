"""The one authoritative version of ember (R7.15): packaging metadata reads it too."""

__version__ = "0.1.0.dev0"
