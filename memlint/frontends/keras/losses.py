"""The loss compile() names, as Keras's canonical function name.

Keras accepts a loss as a string (``"mse"``, ``"mean_squared_error"``, ``"MeanSquaredError"``),
a function (``keras.losses.mse``), a loss object (``keras.losses.MeanSquaredError()``), or a
list or dict of them for several outputs.  Only which loss it is matters to the memory model
(how many output-sized buffers its backward makes under an eager backend).
"""

from __future__ import annotations

from typing import Any, Optional

from memlint.frontends.keras.values import Ref, UserFunction

# spelling (lower case, underscores dropped) -> canonical name
_ALIASES = {
    "mse": "mean_squared_error", "meansquarederror": "mean_squared_error",
    "mae": "mean_absolute_error", "meanabsoluteerror": "mean_absolute_error",
    "mape": "mean_absolute_percentage_error",
    "meanabsolutepercentageerror": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error",
    "meansquaredlogarithmicerror": "mean_squared_logarithmic_error",
    "binarycrossentropy": "binary_crossentropy",
    "categoricalcrossentropy": "categorical_crossentropy",
    "sparsecategoricalcrossentropy": "sparse_categorical_crossentropy",
    "huber": "huber", "huberloss": "huber",
    "kld": "kl_divergence", "kldivergence": "kl_divergence",
    "kullbackleiblerdivergence": "kl_divergence",
    "poisson": "poisson", "hinge": "hinge", "squaredhinge": "squared_hinge",
    "categoricalhinge": "categorical_hinge", "logcosh": "log_cosh",
    "cosinesimilarity": "cosine_similarity",
    "binaryfocalcrossentropy": "binary_focal_crossentropy",
    "categoricalfocalcrossentropy": "categorical_focal_crossentropy",
}


def _one(value: Any) -> Optional[str]:
    if isinstance(value, Ref) and value.name.startswith("keras.losses."):
        value = value.name.rsplit(".", 1)[-1]
    if isinstance(value, str):
        return _ALIASES.get(value.replace("_", "").lower())
    return None


def output_losses(value: Any):
    """Each output's loss where compile() gives one per output: a list (in the model's
    output order) or a dict (output name -> loss) of canonical names, ``""`` for an output
    given no loss (``None``: Keras feeds it no target), None for one not known; None where
    compile() gives one loss for every output (or nothing readable)."""
    def one(v):
        return "" if v is None else _one(v)
    if isinstance(value, dict):
        return {k: one(v) for k, v in value.items() if isinstance(k, str)}
    if isinstance(value, (list, tuple)):
        return [one(v) for v in value]
    return None


def loss_name(value: Any) -> tuple:
    """(canonical name or None, what it is) of a compile() ``loss`` argument.  Several
    outputs' losses give the first one's name when they all name the same loss, else None."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        names = {_one(v) for v in value if v is not None}
        if len(names) == 1 and None not in names:
            if any(v is None for v in value):
                return names.pop(), "the loss of the outputs given one"
            return names.pop(), "every output's loss"
        return None, "the outputs' losses differ or are not all known"
    name = _one(value)
    if name is not None:
        return name, "the loss"
    if isinstance(value, UserFunction):
        return None, f"a custom loss ({value.name})"
    return None, "a loss not known statically"
