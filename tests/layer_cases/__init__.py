"""Layer cases checked against real Keras: one module per layer family, each with ``CASES``.

A case names a Keras layer, its constructor arguments and the input shape(s) it is called on.
The oracle test builds each case with real Keras in a subprocess and with memlint's registry,
and requires the same output shape and the same trainable and non-trainable parameter counts,
or both to reject the case.
"""

from __future__ import annotations


def layer(type_name: str, *args, **kwargs) -> dict:
    """A nested layer argument (e.g. the layer inside ``Bidirectional``)."""
    return {"__layer__": type_name, "args": list(args), "kwargs": kwargs}


def case(type_name: str, *args, input, twin: dict | None = None, call: str = "single",
         **kwargs) -> dict:
    """One layer case.

    ``input`` is a shape with the batch dimension first (``None`` or an int), or a list of
    shapes for layers called on several tensors.  ``call`` says how the inputs are passed:
    ``"single"`` (one tensor), ``"list"`` (one list argument, as merge layers take), or
    ``"args"`` (positional tensors, as ``MultiHeadAttention(query, value)`` takes).
    ``twin`` is a Keras 3 spelling of the same layer, built by real Keras when the case uses a
    spelling modern Keras no longer accepts (Keras 1 arguments).
    """
    spec = {"layer": type_name, "args": list(args), "kwargs": kwargs, "input": input, "call": call}
    if twin is not None:
        spec["twin"] = twin
    return spec


def keras3(type_name: str, *args, **kwargs) -> dict:
    """The Keras 3 twin of a case written in an older spelling."""
    return {"layer": type_name, "args": list(args), "kwargs": kwargs}
