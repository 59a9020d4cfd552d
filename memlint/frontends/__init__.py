"""Frontends turn model sources into :class:`~memlint.ir.ModelGraph` objects."""
