"""MEM001 over-budget-parameters: the training state alone does not fit the GPU.

Weights + gradients + optimizer slots (training) or weights alone (inference) are compared
with the usable GPU memory before any activation is counted.  Over the usable memory is an
error; over ``warn-share`` of it a warning.  The message names the layers that hold the
parameters (runs of consecutive layers of one type) and what would shrink them.
"""

from __future__ import annotations

from typing import Iterable, Optional

from memlint.checks.base import Rule, RuleContext, register
from memlint.diagnostics import Diagnostic
from memlint.memory.dtypes import precision
from memlint.memory.optimizers import slots_per_variable
from memlint.units import format_bytes
from memlint.checks.wording import percent, source_span

# A layer under this share of the model's parameters that keeps its input shape
# (BatchNormalization, Activation, Dropout) does not break a run of layers of one type.
MINOR_SHARE = 0.01


@register
class OverBudgetParameters(Rule):
    code = "MEM001"

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        if ctx.budget is None:
            return
        warn_share = float(ctx.options.get("warn-share", 0.8))
        usable = ctx.budget.usable
        for graph, breakdown in zip(ctx.models, ctx.breakdowns):
            if graph.params <= 0:
                continue
            train = breakdown.mode == "train"
            weights = breakdown.category("weights")
            gradients = breakdown.category("gradients") if train else 0
            optimizer = breakdown.category("optimizer") if train else 0
            state = weights + gradients + optimizer
            if state > usable:
                severity, limit = "error", usable
            elif state > warn_share * usable:
                severity, limit = "warning", int(warn_share * usable)
            else:
                continue
            message = _message(ctx, graph, breakdown, state, weights, gradients, optimizer,
                               severity, limit, warn_share)
            yield self.diagnostic(
                ctx, graph.location, message, severity=severity, model=graph.name,
                data={"mode": breakdown.mode, "state_bytes": state, "weights": weights,
                      "gradients": gradients, "optimizer": optimizer, "usable": usable,
                      "total": ctx.budget.total, "params": graph.params})


# ---------------------------------------------------------------- message

def _message(ctx, graph, breakdown, state, weights, gradients, optimizer, severity, limit,
             warn_share) -> str:
    budget = ctx.budget
    setup = graph.setup
    train = breakdown.mode == "train"
    fmt = format_bytes
    device = "" if budget.device.startswith("GPU with") else f" on {budget.device}"
    usable_text = (f"{fmt(budget.usable)} usable of {fmt(budget.total)}{device} "
                   f"({fmt(budget.cuda_context)} CUDA context and "
                   f"{fmt(budget.framework_reserve)} framework reserve set aside)")
    if train:
        slots = slots_per_variable(setup.optimizer)
        keeps = (f"{setup.optimizer.name} keeps no slots" if slots == 0 else
                 f"{setup.optimizer.name}: {slots} slot{'s' if slots > 1 else ''} per "
                 "parameter")
        what = (f"training state of model '{graph.name}' is {fmt(state)} before any "
                f"activation: weights {fmt(weights)} + gradients {fmt(gradients)} + "
                f"optimizer {fmt(optimizer)} ({keeps})")
    else:
        what = f"weights of model '{graph.name}' take {fmt(state)} before any activation"
    if severity == "error":
        verdict = f"; that is more than the {usable_text}"
    else:
        verdict = (f"; that is {state / budget.usable:.0%} of the {usable_text}, leaving "
                   f"{fmt(max(budget.usable - state, 0))} for activations "
                   f"(warn-share {warn_share:.0%})")
    parts = [what + verdict]

    groups = layer_groups(graph)
    if groups:
        parts.append(_contributors(groups, graph.params))
    goal = ("enough to bring it under the usable memory" if severity == "error"
            else f"enough to get below {warn_share:.0%} of the usable memory")
    fixes = _fixes(graph, breakdown, groups, state, limit, train, goal)
    if fixes:
        parts.append("To shrink it: " + "; ".join(fixes))
    return ". ".join(parts) + "."


def _contributors(groups: list, total_params: int) -> str:
    ranked = sorted(groups, key=lambda g: -g.params)
    shown = [ranked[0]]
    if ranked[0].params < 0.5 * total_params and len(ranked) > 1 \
            and ranked[1].params >= 0.1 * total_params:
        shown.append(ranked[1])
    texts = [f"{g.describe()} {'holds' if len(g.layers) == 1 else 'hold'} "
             f"{percent(g.params / total_params)} of the {total_params:,} parameters"
             for g in shown]
    return " and ".join(texts)


def _fixes(graph, breakdown, groups, state, limit, train, goal) -> list:
    setup = graph.setup
    try:
        prec = precision(setup.dtype_policy)
    except ValueError:
        prec = precision("float32")
    vb = prec.variable_bytes
    slots = slots_per_variable(setup.optimizer) if train else 0
    fixes = []
    excess = state - limit

    gap = _flatten_dense(graph)
    if gap is not None:
        flatten, dense, saved_params, pooling = gap
        saved = saved_params * vb * ((2 + slots) if train else 1)
        enough = f" ({goal})" if excess > 0 and saved >= excess else ""
        fixes.append(f"{pooling} instead of Flatten '{flatten.name}'{_line(flatten)} cuts "
                     f"{saved_params:,} parameters from Dense '{dense.name}'{_line(dense)}, "
                     f"saving {format_bytes(saved)}{enough}")

    if groups:
        top = max(groups, key=lambda g: g.params)
        removable = [layer for layer in top.layers if _shape_preserving(layer)]
        per_param = vb * ((2 + slots) if train else 1)
        count, freed = 0, 0
        for layer in sorted(removable, key=lambda layer: -layer.params):
            if freed >= excess:
                break
            freed += layer.params * per_param
            count += 1
        if excess > 0 and freed >= excess and count < len(top.layers):
            fixes.append(f"removing {count} of the {len(top.layers)} "
                         f"{top.type} layers in that run would free {format_bytes(freed)}, "
                         f"{goal}")
        if top.type_has_filters:
            fixes.append(f"halving the {'filters' if top.has_filters else 'units'} of those "
                         f"{top.type} layers halves their parameters, and quarters them "
                         "where the layer feeding each one is halved too")

    if train and breakdown.category("optimizer") > 0:
        opt = breakdown.category("optimizer")
        enough = f" ({goal})" if excess > 0 and opt >= excess else ""
        fixes.append(f"SGD without momentum instead of {setup.optimizer.name} keeps no "
                     f"optimizer slots and saves {format_bytes(opt)}{enough}")
    if train:
        if not setup.dtype_policy.startswith("mixed_"):
            fixes.append("mixed precision would not help here: variables, gradients and "
                         "optimizer slots stay float32 under mixed_float16")
    elif vb == 4:
        weights = breakdown.category("weights")
        fixes.append(f"running inference in float16 halves the weights "
                     f"({format_bytes(weights)} -> {format_bytes(weights // 2)})")
    return fixes


def _line(layer) -> str:
    span = source_span(layer.location)
    return f" ({span})" if span else ""



# ---------------------------------------------------------------- layer groups

def _shape_preserving(layer) -> bool:
    return bool(layer.output_shapes) and layer.input_shapes == layer.output_shapes


class LayerGroup:
    """A run of consecutive layers of one type that hold parameters."""

    def __init__(self, layer):
        self.type = layer.type
        self.layers = [layer]

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def type_has_filters(self) -> bool:
        return all("filters" in layer.config or "units" in layer.config for layer in self.layers)

    @property
    def has_filters(self) -> bool:
        return "filters" in self.layers[0].config

    def describe(self) -> str:
        first, last = self.layers[0], self.layers[-1]
        if len(self.layers) == 1:
            return f"{self.type} layer '{first.name}'{_line(first)}"
        span = source_span(first.location, last.location)
        lines = f" ({span})" if span else ""
        kind = "nodes" if first.location and first.location.node else "layers"
        return f"{len(self.layers)} {self.type} {kind} {first.name}..{last.name}{lines}"


def layer_groups(graph) -> list:
    """Runs of consecutive layers of the same type that hold parameters.

    Parameter-free layers that keep their input shape (Activation, Dropout) and small ones
    (BatchNormalization) are skipped without ending a run; any other layer ends it.
    """
    total = graph.params or 1
    groups: list = []
    current: Optional[LayerGroup] = None
    for layer in graph.layers:
        if layer.type == "InputLayer":
            continue
        transparent = _shape_preserving(layer) and layer.params <= MINOR_SHARE * total
        if current is not None and layer.type == current.type and layer.params > 0:
            current.layers.append(layer)
        elif transparent:
            continue
        elif layer.params > 0:
            current = LayerGroup(layer)
            groups.append(current)
        else:
            current = None
    return groups


# ---------------------------------------------------------------- Flatten -> Dense

def _flatten_dense(graph) -> Optional[tuple]:
    """(flatten, dense, parameters saved, pooling name) for the largest Dense fed by a
    Flatten of a convolutional feature map, when that Dense holds at least a quarter of the
    model's parameters; None otherwise."""
    by_name = {layer.name: layer for layer in graph.layers}
    best = None
    seen_conv = False
    previous = None
    for layer in graph.layers:
        if "kernel_size" in layer.config:
            seen_conv = True
        if layer.type == "Dense" and seen_conv:
            source = _producer(layer, by_name) or previous
            if source is not None and source.type == "Flatten":
                found = _gap_saving(source, layer)
                if found and layer.params >= 0.25 * graph.params and (
                        best is None or found[0] > best[2]):
                    best = (source, layer, found[0], found[1])
        previous = layer
    return best


def _producer(layer, by_name: dict):
    if layer.inbound and layer.inbound[0]:
        first = layer.inbound[0][0]
        if isinstance(first, (tuple, list)) and first:
            return by_name.get(first[0])
    return None


def _gap_saving(flatten, dense) -> Optional[tuple]:
    shape = flatten.input_shape
    units = dense.config.get("units")
    if not isinstance(shape, tuple) or len(shape) < 3 or len(shape) > 5 \
            or not isinstance(units, int):
        return None
    dims = shape[1:]
    if any(not isinstance(d, int) for d in dims):
        return None
    if flatten.config.get("data_format") == "channels_first":
        channels, spatial = dims[0], dims[1:]
    else:
        channels, spatial = dims[-1], dims[:-1]
    flat = channels
    for d in spatial:
        flat *= d
    saved = (flat - channels) * units
    if saved <= 0:
        return None
    return saved, f"GlobalAveragePooling{len(spatial)}D"
