"""Kernel families: one module per family (spec generator + cached getter + public API)."""
