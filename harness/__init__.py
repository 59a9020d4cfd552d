"""Measurement harness: real Keras 3 peaks (GPU or CPU) next to memlint's estimates.

Nothing here is imported by memlint itself.  ``measure.py`` drives a matrix of
configurations, ``run_one.py`` runs one of them in a fresh process, ``xla_plan.py`` asks XLA
for its memory plan of the compiled train step (works on a CPU), ``compare.py`` turns the
recorded JSON lines into a table.
"""
