"""Data files shipped with memlint (GPU catalog)."""
