"""The Embedding layer: a lookup table from integer ids to dense vectors."""

from __future__ import annotations

from memlint.ir import Weight
from memlint.layers.base import (Args, LayerError, LayerKind, Saved, UnresolvedArgument,
                                 register)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LayerError(f"{name} must be a positive int, got {value!r}")
    return value


@register
class Embedding(LayerKind):
    """``Embedding(input_dim, output_dim, mask_zero=False, lora_rank=None)``.

    The output appends ``output_dim`` to the input shape; the ``embeddings`` table is
    ``(input_dim, output_dim)``.  Keras 1/2's ``input_length=`` is accepted and ignored by
    Keras 3 (it only fixed the model's input shape); it is kept in the config for frontends.
    With ``lora_rank`` the table is frozen and two low-rank factors are trained instead.
    """

    name = "Embedding"
    family = "embedding"

    def configure(self, args: Args) -> dict:
        try:
            input_length = args.get("input_length", None)
        except UnresolvedArgument:
            input_length = None
        lora_rank = args.get("lora_rank", None)
        if lora_rank is not None:
            _positive_int("lora_rank", lora_rank)
        return {
            "input_dim": _positive_int("input_dim", args.get("input_dim", pos=0)),
            "output_dim": _positive_int("output_dim", args.get("output_dim", pos=1)),
            "mask_zero": bool(args.get("mask_zero", False)),
            "input_length": input_length,
            "lora_rank": lora_rank,
        }

    def output_shape(self, config, input_shape):
        return tuple(input_shape) + (config["output_dim"],)

    def weights(self, config, input_shape):
        table = (config["input_dim"], config["output_dim"])
        rank = config["lora_rank"]
        if not rank:
            return [Weight("embeddings", table)]
        return [
            Weight("embeddings", table, trainable=False),
            Weight("lora_embeddings_a", (config["input_dim"], rank)),
            Weight("lora_embeddings_b", (rank, config["output_dim"])),
        ]

    def saved(self, config, input_shape, output_shape):
        """The indices (its input) for the table's gradient, a dense table-sized buffer (the
        weight gradient itself: XLA scatters the output's gradient straight into it)."""
        return [Saved("input", needed_for="weights")]
