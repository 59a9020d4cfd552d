"""An upper bound for a training step that runs several models, or one several times.

A custom training loop's ``GradientTape`` block that calls a GAN's generator once and its
discriminator twice holds what every call keeps for the backward pass at once; each model's
own estimate is of one call alone, a lower bound (``TrainingSetup.shared_step``).  What the
step holds at any moment is, per call, at most what that call's model holds at its own peak
(its weights, gradients and slots, counted again for each call: an over-estimate), plus what
passes between the calls: each call's input and output and their gradients (the
discriminator's input gradient feeds the generator's backward; standalone estimates make
no gradient of a model's input).  The sum is the bound; it exists only where every model
of the step has a complete estimate of its own.
"""

from __future__ import annotations

from typing import Optional

from memlint.ir import as_shape_list
from memlint.memory.dtypes import precision
from memlint.memory.tensors import tensor_bytes


def bound_shared_steps(graphs: list, breakdowns: list) -> None:
    """Set ``shared_bound`` (and its source) on each breakdown of a model in a shared step
    whose models all have complete estimates of their own; ``graphs`` and ``breakdowns``
    are parallel (the memory graphs the breakdowns were made of)."""
    by_name = {graph.name: (graph, breakdown) for graph, breakdown in zip(graphs, breakdowns)}
    for graph, breakdown in zip(graphs, breakdowns):
        calls = graph.setup.shared_calls
        if not breakdown.shared_step or not calls:
            continue
        total, terms = 0, []
        for name, count in calls:
            found = by_name.get(name)
            if found is None or not _complete_alone(found[1]):
                break
            per_call = found[1].peak + 2 * _passed_bytes(*found)
            total += count * per_call
            terms.append(f"{name}" + ("" if count == 1 else f" x {count}"))
        else:
            breakdown.shared_bound = total
            breakdown.shared_bound_source = (
                f"the sum of each call's own peak ({' + '.join(terms)}) with its inputs, "
                "outputs and their gradients")


def _complete_alone(breakdown) -> bool:
    """Every size of the model's own estimate is known (only the shared step is open)."""
    return breakdown.batch_known and not breakdown.unknown_activations \
        and not breakdown.not_modelled


def _passed_bytes(graph, breakdown) -> int:
    """What one call takes in and gives out at its batch: its inputs and its outputs (a
    model's last layer's where it names no outputs)."""
    element = precision(graph.setup.dtype_policy).compute_bytes
    batch = breakdown.batch_size
    shapes = list(graph.input_shapes)
    layers = {layer.name: layer for layer in graph.layers}
    if graph.outputs:
        for name, call, index in graph.outputs:
            made = layers[name].output_shapes[call] if name in layers and call < len(
                layers[name].output_shapes) else None
            shapes.append(made[index] if isinstance(made, list) else made)
    elif graph.layers:
        shapes += as_shape_list(graph.layers[-1].output_shape)
    return sum(tensor_bytes(shape, batch, element) or 0 for shape in shapes)
