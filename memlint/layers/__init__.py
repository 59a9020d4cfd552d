"""The layer registry: one :class:`~memlint.layers.base.LayerKind` per Keras layer class.

Families live in their own modules (core, convolutional, pooling, ...), the way Keras groups
its layers in folders.  A family is imported, and registers its layers, the first time the
registry is asked for one of its names (``index.py`` lists them); listing the registry
imports them all.
"""

from memlint.ir import Weight
from memlint.layers.base import REGISTRY, Args, LayerError, LayerInstance, LayerKind


def lookup(name: str) -> LayerKind | None:
    """The layer kind registered under a Keras class name (current or older spelling)."""
    return REGISTRY.get(name)


def instantiate(type_name: str, args: "Args", *, location=None) -> "LayerInstance":
    """Create a layer instance from constructor arguments.

    Generic layer arguments (``name``, ``trainable``) are read here; everything else is the
    kind's to interpret.  Raises ``KeyError`` for an unregistered layer type, and
    :class:`LayerError` / :class:`UnresolvedArgument` from the kind's ``configure``.
    """
    kind = REGISTRY[type_name]
    config = kind.configure(args)
    name = args.get("name", None)
    trainable = args.get("trainable", True)
    return LayerInstance(kind=kind, config=config, name=name if isinstance(name, str) else None,
                         trainable=bool(trainable), location=location)


def call(layer: "LayerInstance", input_shape) -> tuple:
    """Output shape and weights of ``layer`` built on ``input_shape``.

    Weights of a layer created with ``trainable=False`` are all non-trainable.
    """
    kind = layer.kind
    if kind.multi_input and not isinstance(input_shape, list):
        raise LayerError(f"{kind.name} must be called on a list of inputs")
    out = kind.output_shape(layer.config, input_shape)
    weights = kind.weights(layer.config, input_shape)
    if not layer.trainable:
        weights = [Weight(w.name, w.shape, trainable=False) for w in weights]
    return out, weights
