"""Canonical names for the many spellings of Keras, TensorFlow and NumPy objects.

``from tensorflow.keras.layers import Conv2D``, ``tf.keras.layers.Conv2D``,
``keras.layers.convolutional.Convolution2D`` and ``keras.src.layers.Conv2D`` all end up as
``keras.layers.<Class>``; models as ``keras.Sequential`` / ``keras.Model`` / ``keras.Input``.
"""

from __future__ import annotations

# Prefixes rewritten to the Keras namespace (longest first).
_PREFIXES = (
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.keras.", "keras."),
    ("tensorflow.compat.v1.keras.", "keras."),
    ("tensorflow.compat.v2.keras.", "keras."),
    ("tf_keras.src.", "keras."),
    ("tf_keras.", "keras."),
    ("keras.src.", "keras."),
    ("tensorflow.optimizers.", "keras.optimizers."),
    ("tensorflow.train.", "tensorflow.train."),
)
_EXACT = {
    "tensorflow.keras": "keras",
    "tf_keras": "keras",
    "keras.src": "keras",
    "keras.models.Sequential": "keras.Sequential",
    "keras.models.Model": "keras.Model",
    "keras.engine.training.Model": "keras.Model",
    "keras.engine.sequential.Sequential": "keras.Sequential",
    "keras.engine.functional.Functional": "keras.Model",
    "keras.models.Functional": "keras.Model",  # Keras 3's own spelling (keras.src.models)
    "keras.models.functional.Functional": "keras.Model",
    "keras.models.model.Model": "keras.Model",
    "keras.models.sequential.Sequential": "keras.Sequential",
    "keras.layers.Input": "keras.Input",
    "keras.models.Input": "keras.Input",  # Keras 2's keras.models re-exported Input
    "keras.models.InputLayer": "keras.layers.InputLayer",
    "keras.engine.topology.Input": "keras.Input",
    "keras.engine.input_layer.Input": "keras.Input",
    "keras.layers.InputLayer": "keras.layers.InputLayer",
    "keras.engine.topology.InputLayer": "keras.layers.InputLayer",
    "keras.layers.merge": "keras.layers.merge",
    "keras.utils.np_utils.to_categorical": "keras.utils.to_categorical",
    "keras.mixed_precision.experimental.set_policy": "keras.mixed_precision.set_global_policy",
    "keras.mixed_precision.set_policy": "keras.mixed_precision.set_global_policy",
    "keras.mixed_precision.experimental.Policy": "keras.mixed_precision.Policy",
    "keras.mixed_precision.DTypePolicy": "keras.mixed_precision.Policy",
    "keras.DTypePolicy": "keras.mixed_precision.Policy",
    "keras.config.set_dtype_policy": "keras.mixed_precision.set_global_policy",
    "keras.config.set_floatx": "keras.backend.set_floatx",
    "keras.config.set_image_data_format": "keras.backend.set_image_data_format",
    "keras.config.image_data_format": "keras.backend.image_data_format",
    "keras.utils.set_random_seed": "keras.utils.set_random_seed",
    "numpy": "numpy",
    # Python 2/3 compatibility spellings of the builtins (six, future, past)
    **{f"{module}.{name}": f"builtins.{name}" for module in ("six.moves", "future.builtins",
                                                            "builtins")
       for name in ("range", "zip", "map", "filter", "input")},
    "six.moves.xrange": "builtins.range",
    "past.builtins.xrange": "builtins.range",
}

# modules of keras.backend whose functions the package itself exports
_BACKEND_MODULES = frozenset({"common", "config", "tensorflow_backend", "theano_backend",
                              "cntk_backend", "load_backend"})


def canonical(dotted: str) -> str:
    """The canonical spelling of a fully qualified name (after import aliases are undone)."""
    if dotted in _EXACT:
        return _EXACT[dotted]
    for old, new in _PREFIXES:
        if dotted.startswith(old):
            dotted = new + dotted[len(old):]
            break
    if dotted in _EXACT:
        return _EXACT[dotted]
    parts = dotted.split(".")
    if len(parts) == 4 and parts[:2] == ["keras", "backend"] and parts[2] in _BACKEND_MODULES:
        # keras.backend.common.image_dim_ordering (Keras 2), keras.src.backend.config.X
        return canonical("keras.backend." + parts[3])
    if len(parts) >= 3 and parts[0] == "keras" and parts[1] == "layers":
        # keras.layers.convolutional.Conv2D, keras.layers.core.Dense -> keras.layers.Conv2D
        dotted = "keras.layers." + parts[-1]
        return _EXACT.get(dotted, dotted)
    if len(parts) >= 3 and parts[0] == "keras" and parts[1] == "optimizers":
        # keras.optimizers.legacy.Adam, keras.optimizers.adam.Adam -> keras.optimizers.Adam
        if parts[-1][:1].isupper():
            return "keras.optimizers." + parts[-1]
    return dotted


def layer_class(dotted: str) -> str | None:
    """The layer class name if ``dotted`` is a canonical ``keras.layers.<Class>`` name."""
    if dotted.startswith("keras.layers.") and dotted.count(".") == 2:
        name = dotted.rsplit(".", 1)[1]
        # InputSpec is a class of keras.layers but no layer (a custom layer's input check)
        return name if name[:1].isupper() and name != "InputSpec" else None
    return None


def to_snake_case(name: str) -> str:
    """Keras's default layer-name stem for a class name (``MaxPooling2D`` -> ``max_pooling2d``)."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < len(name) else ""
            # a capital starting a capitalised word ("Pooling"), or after a lower-case letter
            if prev.islower() or (nxt.islower() and prev != "_"):
                out.append("_")
        out.append(ch.lower())
    return "".join(c for c in "".join(out) if c.isalnum() or c == "_")
