"""Preprocessing layers that can sit inside a model: Rescaling."""

from __future__ import annotations

from memlint.layers.base import Args, LayerError, LayerKind, UnresolvedArgument, register


@register
class Rescaling(LayerKind):
    """``Rescaling(scale, offset=0.0)``: ``x * scale + offset``; no weights, same shape."""

    name = "Rescaling"
    family = "preprocessing"

    def configure(self, args: Args) -> dict:
        if not args.has("scale", pos=0):
            raise LayerError("Rescaling needs a 'scale' argument")
        config = {}
        for key, pos, default in (("scale", 0, None), ("offset", 1, 0.0)):
            try:
                value = args.get(key, default, pos=pos)
            except UnresolvedArgument:
                value = None  # e.g. a NumPy array: it changes no shape
            config[key] = list(value) if isinstance(value, tuple) else value
        return config
