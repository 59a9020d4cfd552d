"""Recurrent layers: SimpleRNN, LSTM, GRU, the generic RNN with its cells (SimpleRNNCell,
LSTMCell, GRUCell, StackedRNNCells), Keras 2's CuDNNLSTM and CuDNNGRU, and the Bidirectional
wrapper.

A recurrent layer reads ``(batch, steps, features)`` and returns the last output
``(batch, units)``, or every output ``(batch, steps, units)`` with ``return_sequences``.
With ``return_state`` it returns a list: the output, then one ``(batch, units)`` shape per
state (two for LSTM: hidden and cell state).

Weights follow Keras 3: a ``kernel`` ``(features, gates * units)``, a ``recurrent_kernel``
``(units, gates * units)`` and a ``bias`` ``(gates * units,)``, where LSTM has four gates,
GRU three (with ``reset_after=True``, the Keras 3 default, GRU keeps separate input and
recurrent biases: ``(2, 3 * units)``) and SimpleRNN one.
"""

from __future__ import annotations

from dataclasses import replace

from memlint.ir import Weight
from memlint.layers.base import (
    NOT_TORCH,
    PROFILE_NAMES,
    REGISTRY,
    Saved,
    nested_layer,
    Args,
    LayerError,
    LayerKind,
    UnresolvedArgument,
    check_rank,
    nested_object,
    register,
)

_FLAGS = ("return_sequences", "return_state", "go_backwards", "stateful", "unroll")

# What a recurrence keeps for its backward pass.  Keras 3 on JAX runs SimpleRNN, LSTM and GRU
# as a ``lax.scan`` (the cuDNN kernels need a device to be sized: the GPU plan uses the scan);
# XLA's plan of the train step stacks, per step, buffers of ``(steps, batch, units)``, of
# ``(steps, batch, gates * units)`` and a time-major copy of the input (measured with
# harness/probe_saved.py on H100 and T4 targets, any batch, steps and units; see
# docs/memory-model-v2.md): gates -> (unit-sized, gate-sized, input copies).  SimpleRNN's
# fourth unit-sized buffer stands for the fragmentation of the loop's buffers in XLA's plan.
SCAN_BUFFERS = {1: (4, 0, 1), 4: (13, 0, 1), 3: (9, 2, 0)}


# Keras's torch backend runs the cell in a Python loop over the unbound time steps (views of
# the input: no copy); autograd keeps, per step, the unit-sized tensors the cell's backward
# reads (keras/src/backend/torch/rnn.py and the cells in keras/src/layers/rnn; measured on
# the CPU torch step, docs/torch-oracle.md): SimpleRNN its tanh output; LSTM the four gate
# activations, the carry, its tanh and the output, and the gates' logits (four units wide:
# Keras's sigmoid stores its input on its output, ``_keras_logits``); GRU the update and
# reset gates and their logits, the recurrent projection (three units wide), the candidate,
# ``1 - z`` and the output.  LSTM and GRU project every step's input before the loop
# (``x_proj``, ``_fallback_lstm`` / ``_fallback_gru``); the backward sums the gradients of its
# slices, each a zero-filled tensor of the projections' size.  On a GPU with cuDNN, Keras
# hands LSTM and GRU to cuDNN, whose reserve space was not measured.
TORCH_STEP_UNITS = {1: 1, 4: 11, 3: 10}


def scan_saved(gates: int, units: int, input_shape, sequences: bool = True) -> list:
    """The per-step buffers a scanned recurrence of ``gates`` gates keeps (see
    ``SCAN_BUFFERS``) for an input ``(batch, steps, features)``, and what its forward pass
    holds while it runs, in inference too (measured on H100 predict plans, batch 64, 50
    steps: an LSTM or SimpleRNN takes a time-major copy of its input and stacks every step's
    output even when it returns the last one only; a GRU projects every step's input
    before the loop, twice ``(steps, batch, 3 units)``).  Scratch of the same name as a
    saved buffer is not counted twice in training.  Under torch: ``TORCH_STEP_UNITS``, and
    the stacked outputs while the call runs when it returns the last step only."""
    per_unit, per_gate, copies = SCAN_BUFFERS.get(gates, (3 * gates + 1, 0, 1))
    batch, steps, features = input_shape[0], input_shape[1], input_shape[-1]
    out = [Saved("steps' states and gates", (batch, steps, units), count=per_unit,
                 profiles=NOT_TORCH),
           Saved("steps' states and gates", (batch, steps, units),
                 count=TORCH_STEP_UNITS.get(gates, 2 * gates + 1), profiles=("torch",))]
    if not sequences:
        out.append(Saved("stacked outputs", (batch, steps, units), when="forward",
                          profiles=("torch",)))
    if gates > 1:  # LSTM and GRU project every step's input before the loop
        projections = (batch, steps, gates * units)
        out.append(Saved("input projections", projections, when="forward",
                         profiles=("torch",)))
        # each step's slice gradient is a zero-filled tensor of the projections' size,
        # summed into the last: three alive while the loop's backward accumulates them
        out.append(Saved("input projection gradients", projections, when="backward",
                         count=3, profiles=("torch",)))
    if per_gate:
        out.append(Saved("steps' input projections", (batch, steps, gates * units),
                         count=per_gate, profiles=NOT_TORCH))
        out.append(Saved("steps' input projections", (batch, steps, gates * units),
                         count=per_gate, when="forward", profiles=NOT_TORCH))
    if copies:
        out.append(Saved("time-major input", (batch, steps, features), count=copies,
                         profiles=NOT_TORCH))
        out.append(Saved("time-major input", (batch, steps, features), count=copies,
                         when="forward", profiles=NOT_TORCH))
        if not sequences:  # the stacked outputs are not the layer's output
            out.append(Saved("steps' states and gates", (batch, steps, units),
                             when="forward", profiles=NOT_TORCH))
    if gates == 4:  # the step's gate blocks while the loop's backward runs
        out.append(Saved("step gates", (batch, gates * units), when="backward", count=5,
                         profiles=NOT_TORCH))
    return out


class Recurrent(LayerKind):
    """What SimpleRNN, LSTM and GRU share; subclasses set ``gates`` and ``states``."""

    family = "rnn"
    gates = 1  # blocks of ``units`` columns in the kernels
    states = 1  # state tensors returned with ``return_state``

    def configure(self, args: Args) -> dict:
        units = args.get("units", pos=0, aliases=("output_dim",))  # Keras 1: output_dim
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise LayerError(f"units must be a positive int, got {units!r}")
        config = {"units": units, "use_bias": bool(args.get("use_bias", True))}
        for flag in _FLAGS:
            config[flag] = bool(args.get(flag, False))
        return config

    def output_shape(self, config, input_shape):
        check_rank(input_shape, 3, self.name)
        batch, steps = input_shape[0], input_shape[1]
        if config["stateful"] and batch is None:
            raise LayerError(f"a stateful {self.name} needs a fixed batch size, got {input_shape}")
        units = config["units"]
        output = (batch, steps, units) if config["return_sequences"] else (batch, units)
        if not config["return_state"]:
            return output
        return [output] + [(batch, units)] * self.states

    def saved(self, config, input_shape, output_shape):
        return scan_saved(self.gates, config["units"], input_shape,
                          config.get("return_sequences", True))

    def weights(self, config, input_shape):
        features = input_shape[-1]
        if features is None:
            raise LayerError(
                f"the last dimension of the input to {self.name} must be defined, got None"
            )
        units = config["units"]
        columns = self.gates * units
        out = [
            Weight("kernel", (features, columns)),
            Weight("recurrent_kernel", (units, columns)),
        ]
        if config["use_bias"]:
            out.append(Weight("bias", self.bias_shape(config)))
        return out

    def bias_shape(self, config) -> tuple:
        return (self.gates * config["units"],)


def _check_use_cudnn(args: Args) -> None:
    value = args.get("use_cudnn", "auto")
    if value not in ("auto", True, False):
        raise LayerError(f"use_cudnn must be 'auto', True or False, got {value!r}")


# On a GPU, Keras 3 on JAX hands an LSTM or GRU to cuDNN (``cudnn_rnn_ffi``) unless its
# configuration rules it out (keras/src/layers/rnn/lstm.py ``inner_loop``,
# keras/src/backend/jax/rnn.py ``cudnn_ok``): use_cudnn=False, recurrent dropout, unroll, no
# bias, an activation other than tanh or a recurrent activation other than sigmoid, a GRU
# with reset_after=False (a mask does too; memlint does not follow masks, so it assumes
# cuDNN).  XLA's plans of such steps on an H200 held 32 MiB and more beyond the scan loop's
# buffers (tiny models: +34 MB; keras.io's bidirectional IMDB LSTM at batch 32: 139 MB ->
# 370 MB: docs/gpu-verification.md).  cuDNN sizes its workspace and reserve space at run time,
# so memlint cannot count them yet.
CUDNN_RNN_NOT_MODELLED = ("on a GPU Keras 3 on JAX runs it through cuDNN, whose workspace and "
                          "reserve space memlint does not count (32 MiB and more per step, "
                          "measured on an H200)")


def keras_cudnn(args: Args, gru: bool = False) -> bool:
    """Whether Keras would hand this LSTM or GRU to cuDNN on a GPU (an argument memlint
    cannot read counts as allowing it: the conservative side)."""
    def is_(name, default, *allowed):
        try:
            value = args.get(name, default)
        except UnresolvedArgument:
            return True
        return not isinstance(value, (str, bool, int, float)) or value in allowed

    try:
        off = args.get("use_cudnn", "auto") is False
    except UnresolvedArgument:
        off = False
    return (not off
            and is_("recurrent_dropout", 0, 0, 0.0) and is_("unroll", False, False)
            and is_("use_bias", True, True) and is_("activation", "tanh", "tanh")
            and is_("recurrent_activation", "sigmoid", "sigmoid")
            and (not gru or is_("reset_after", True, True)))


@register
class SimpleRNN(Recurrent):
    """``SimpleRNN(units)``: a fully connected recurrence, one state."""

    name = "SimpleRNN"


@register
class LSTM(Recurrent):
    """``LSTM(units)``: four gates, hidden and cell states."""

    name = "LSTM"
    gates = 4
    states = 2

    def configure(self, args: Args) -> dict:
        _check_use_cudnn(args)
        return {**super().configure(args), "keras_cudnn": keras_cudnn(args)}

    def not_modelled(self, config, profile):
        return CUDNN_RNN_NOT_MODELLED if profile == "xla" and config.get("keras_cudnn") \
            else None


class _GRUGates:
    """Three gates; ``reset_after`` (Keras 3's default) keeps separate input and recurrent
    biases.  Mixed into GRU and GRUCell."""

    gates = 3

    def configure(self, args: Args) -> dict:
        config = super().configure(args)
        config["reset_after"] = bool(args.get("reset_after", True))
        return config

    def bias_shape(self, config) -> tuple:
        if config["reset_after"]:
            return (2, 3 * config["units"])
        return (3 * config["units"],)


@register
class GRU(_GRUGates, Recurrent):
    """``GRU(units, reset_after=True)``: three gates, one state."""

    name = "GRU"

    def configure(self, args: Args) -> dict:
        _check_use_cudnn(args)
        return {**super().configure(args), "keras_cudnn": keras_cudnn(args, gru=True)}

    not_modelled = LSTM.not_modelled


# ---------------------------------------------------------------- Keras 2 CuDNN layers

class _CuDNNRecurrent(Recurrent):
    """Keras 2's GPU-only ``CuDNNLSTM`` / ``CuDNNGRU`` (``tf.compat.v1.keras.layers``),
    which Keras 3 dropped.  Always biased, with separate input and recurrent biases:
    ``bias`` ``(2 * gates * units,)``.  Same outputs as LSTM / GRU; no ``use_bias``,
    ``unroll`` or activations."""

    def configure(self, args: Args) -> dict:
        config = super().configure(args)
        config["use_bias"] = True
        return config

    def bias_shape(self, config) -> tuple:
        return (2 * self.gates * config["units"],)


@register
class CuDNNLSTM(_CuDNNRecurrent):
    """``CuDNNLSTM(units)``: 4 * (features * units + units * units) + 8 * units weights."""

    name = "CuDNNLSTM"
    gates = 4
    states = 2


@register
class CuDNNGRU(_CuDNNRecurrent):
    """``CuDNNGRU(units)``: 3 * (features * units + units * units) + 6 * units weights
    (the count of a Keras 3 ``GRU(units)`` with ``reset_after=True``)."""

    name = "CuDNNGRU"
    gates = 3


# ---------------------------------------------------------------- RNN and its cells

def _units(args: Args) -> int:
    units = args.get("units", pos=0)
    if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
        raise LayerError(f"units must be a positive int, got {units!r}")
    return units


class RecurrentCell(LayerKind):
    """One step of a recurrence, run over time by :class:`RNN`; subclasses set ``gates`` and
    ``states``.  Its weights are those of the matching layer (LSTMCell ~ LSTM, ...)."""

    family = "rnn"
    gates = 1
    states = 1

    def configure(self, args: Args) -> dict:
        return {"units": _units(args), "use_bias": bool(args.get("use_bias", True))}

    def state_size(self, config):
        """An int for one state, a list for several (as the Keras cell's ``state_size``)."""
        return config["units"] if self.states == 1 else [config["units"]] * self.states

    def output_size(self, config) -> int:
        return config["units"]

    def output_shape(self, config, input_shape):
        raise LayerError(f"{self.name} is a cell: wrap it in RNN(...) to run it over a sequence")

    def weights(self, config, input_shape):
        features = input_shape[-1] if input_shape else None
        if features is None:
            raise LayerError(f"the feature dimension of the input to {self.name} must be "
                             f"defined, got {input_shape}")
        units = config["units"]
        out = [Weight("kernel", (features, self.gates * units)),
               Weight("recurrent_kernel", (units, self.gates * units))]
        if config["use_bias"]:
            out.append(Weight("bias", self.bias_shape(config)))
        return out

    def bias_shape(self, config) -> tuple:
        return (self.gates * config["units"],)


@register
class SimpleRNNCell(RecurrentCell):
    """``SimpleRNNCell(units)``: one state."""

    name = "SimpleRNNCell"


@register
class LSTMCell(RecurrentCell):
    """``LSTMCell(units)``: four gates; two states (hidden and cell)."""

    name = "LSTMCell"
    gates = 4
    states = 2


@register
class GRUCell(_GRUGates, RecurrentCell):
    """``GRUCell(units, reset_after=True)``: three gates, one state."""

    name = "GRUCell"


def _cell(value, what: str) -> dict:
    """A cell argument as a plain description (class name, config, trainable); a list of
    cells becomes a StackedRNNCells."""
    if isinstance(value, (list, tuple)):
        cells = [_cell(v, what) for v in value]
        if any("object" in c for c in cells):
            raise UnresolvedArgument(what, "a stack of cells of the file's own classes is "
                                           "not modelled")
        return {"class_name": "StackedRNNCells", "config": {"cells": cells}, "trainable": True}
    found = nested_object(value)  # a cell class of the analysed file
    if found is not None and hasattr(found["object"], "cell_state_size"):
        return found
    cell = nested_layer(value, what, "an RNN cell")
    if not isinstance(REGISTRY[cell["class_name"]], (RecurrentCell, StackedRNNCells)):
        raise LayerError(f"{what} must be an RNN cell, got {cell['class_name']}")
    return cell


def _cell_state_size(cell: dict, step: tuple = ()):
    if "object" in cell:  # a cell class of the file (built on the step's shape first)
        return cell["object"].cell_state_size(step)
    return REGISTRY[cell["class_name"]].state_size(cell["config"])


def _flat_sizes(size) -> list:
    """The integers of a (nested) cell state size."""
    if isinstance(size, (list, tuple)):
        return [n for entry in size for n in _flat_sizes(entry)]
    return [size] if isinstance(size, int) else []


def _cell_output_size(cell: dict, step: tuple = ()) -> int:
    if "object" in cell:
        return cell["object"].cell_output_size(step)
    return REGISTRY[cell["class_name"]].output_size(cell["config"])


def _cell_saved(cell: dict, input_shape: tuple) -> list:
    """What a cell (or a stack of cells) run over ``input_shape`` keeps for backward (of a
    cell class of the file: not known, see :meth:`RNN.not_modelled`)."""
    if "object" in cell:
        return []
    kind = REGISTRY[cell["class_name"]]
    if isinstance(kind, StackedRNNCells):
        out, shape = [], input_shape
        for inner in cell["config"]["cells"]:
            out += _cell_saved(inner, shape)
            shape = tuple(shape[:2]) + (_cell_output_size(inner),)
        return out
    # a cell steps inside a generic loop: no projection of every step before it, and no
    # forward scratch measured beyond its output (the walk counts that)
    return [s for s in scan_saved(kind.gates, cell["config"]["units"], input_shape)
            if s.when != "forward"]


def _cell_weights(cell: dict, step_shape: tuple) -> list:
    if "object" in cell:
        return cell["object"].cell_weights(step_shape)
    kind = REGISTRY[cell["class_name"]]
    return [Weight(w.name, w.shape, trainable=w.trainable and cell["trainable"])
            for w in kind.weights(cell["config"], step_shape)]


@register
class StackedRNNCells(LayerKind):
    """``StackedRNNCells(cells)``: cells run one after another within a time step; each
    cell's input is the previous cell's output.  Its state size lists every cell's."""

    name = "StackedRNNCells"
    family = "rnn"

    def configure(self, args: Args) -> dict:
        cells = args.get("cells", pos=0)
        if not isinstance(cells, (list, tuple)):
            raise LayerError(f"StackedRNNCells needs a list of cells, got {cells!r}")
        if not cells:
            raise LayerError("StackedRNNCells needs at least one cell")
        return {"cells": [_cell(c, "cells") for c in cells]}

    def state_size(self, config) -> list:
        return [_cell_state_size(c) for c in config["cells"]]

    def output_size(self, config) -> int:
        return _cell_output_size(config["cells"][-1])

    def output_shape(self, config, input_shape):
        raise LayerError("StackedRNNCells is a cell: wrap it in RNN(...)")

    def weights(self, config, input_shape):
        out = []
        shape = tuple(input_shape)
        for cell in config["cells"]:
            out += _cell_weights(cell, shape)
            shape = (shape[0], _cell_output_size(cell))
        return out


@register
class RNN(LayerKind):
    """``RNN(cell, return_sequences=False, return_state=False, go_backwards=False,
    stateful=False, unroll=False)``; a list of cells is a StackedRNNCells.

    Each time step feeds the cell ``(batch, *shape[2:])``.  The output has the cell's output
    size; with ``return_state`` one shape per entry of the cell's state size follows, nested
    as the state size is (a stacked LSTMCell contributes a list of two shapes).
    """

    name = "RNN"
    family = "rnn"

    def configure(self, args: Args) -> dict:
        cell = args.get("cell", pos=0)
        if isinstance(cell, (list, tuple)) and not cell:
            raise LayerError("RNN needs at least one cell")
        config = {"cell": _cell(cell, "cell")}
        for pos, flag in enumerate(_FLAGS, start=1):
            config[flag] = bool(args.get(flag, False, pos=pos))
        return config

    def output_shape(self, config, input_shape):
        if len(input_shape) < 2:
            raise LayerError(f"RNN needs input of rank >= 2, got {input_shape}")
        self.weights(config, input_shape)  # Keras builds the cell first
        batch, length = input_shape[0], input_shape[1]
        if config["stateful"] and batch is None:
            raise LayerError(f"a stateful RNN needs a fixed batch size, got {input_shape}")
        cell = config["cell"]
        step = (batch,) + tuple(input_shape[2:])
        size = _cell_output_size(cell, step)
        output = (batch, length, size) if config["return_sequences"] else (batch, size)
        if not config["return_state"]:
            return output
        state_size = _cell_state_size(cell, step)
        states = []
        for entry in state_size if isinstance(state_size, list) else [state_size]:
            if isinstance(entry, list):
                states.append([(batch, s) for s in entry])
            else:
                states.append((batch, entry))
        return [output] + states

    def weights(self, config, input_shape):
        if len(input_shape) < 2:
            raise LayerError(f"RNN needs input of rank >= 2, got {input_shape}")
        step = (input_shape[0],) + tuple(input_shape[2:])
        return _cell_weights(config["cell"], step)

    def saved(self, config, input_shape, output_shape):
        """The cells' buffers, and while the loop runs (inference too) under XLA a
        time-major copy of the input (none of another recurrence's sequence: it is
        time-major already) and, where only the last step is returned, every step's output
        stacked (the H100 predict plan of two RNN(StackedRNNCells of three LSTMCells), batch
        32, 12 steps: ``f32[12, 32, 6]`` for the data beside the first loop's
        ``f32[12, 32, 12]`` outputs, which the second loop reads as they are, beside its own
        ``f32[12, 32, 6]``), and the loop's states (there six ``f32[32, 12]``)."""
        shape = tuple(input_shape)
        step = (shape[0],) + shape[2:]
        out = _cell_saved(config["cell"], shape)
        if len(shape) == 3:
            out.append(Saved("time-major input", shape, when="forward", profiles=NOT_TORCH))
            units = sum(_flat_sizes(_cell_state_size(config["cell"], step)))
            out.append(Saved("loop states", (shape[0], units), when="forward",
                             profiles=NOT_TORCH))
            if not config["return_sequences"]:
                steps = (shape[0], shape[1], _cell_output_size(config["cell"], step))
                out.append(Saved("steps' outputs", steps, when="forward", profiles=NOT_TORCH))
        return out

    def not_modelled(self, config, profile):
        """A cell class of the file: its ``call()``, run on every step, is not traced."""
        found = config["cell"].get("object")
        return found.untraced_cell() if found is not None else None


# ---------------------------------------------------------------- Bidirectional

_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


def _wrapped(value, what: str) -> dict:
    """A recurrent layer argument of Bidirectional as a plain description."""
    layer = nested_layer(value, f"Bidirectional {what}", "a recurrent layer")
    if not isinstance(REGISTRY[layer["class_name"]], (Recurrent, RNN)):
        raise LayerError(
            f"Bidirectional {what} must be a recurrent layer, got {layer['class_name']}"
        )
    return layer


@register
class Bidirectional(LayerKind):
    """``Bidirectional(layer, merge_mode="concat", backward_layer=None)``.

    Runs a copy of ``layer`` forwards and a second one backwards (a copy with
    ``go_backwards=True`` unless ``backward_layer`` is given) and merges their outputs:
    ``concat`` doubles the last axis, ``sum``/``mul``/``ave`` keep it, ``None`` returns both.
    Keras derives the output shape from the forward layer alone.
    """

    name = "Bidirectional"
    family = "rnn"

    def configure(self, args: Args) -> dict:
        forward = _wrapped(args.get("layer", pos=0), "layer")
        merge_mode = args.get("merge_mode", "concat", pos=1)
        if merge_mode not in _MERGE_MODES:
            raise LayerError(
                f"merge_mode must be one of 'concat', 'sum', 'mul', 'ave' or None, "
                f"got {merge_mode!r}"
            )
        backward_layer = args.get("backward_layer", None, pos=3)
        if backward_layer is None:
            backward = {**forward, "config": {**forward["config"], "go_backwards": True}}
        else:
            backward = _wrapped(backward_layer, "backward_layer")
        fwd, bwd = forward["config"], backward["config"]
        if fwd["go_backwards"] == bwd["go_backwards"]:
            raise LayerError("the forward and backward layers need different go_backwards values")
        for flag in ("stateful", "return_sequences", "return_state"):
            if fwd[flag] != bwd[flag]:
                raise LayerError(f"the forward and backward layers differ in {flag}")
        return {"layer": forward, "backward_layer": backward, "merge_mode": merge_mode}

    def not_modelled(self, config, profile):
        for wrapped in (config["layer"], config["backward_layer"]):
            found = REGISTRY[wrapped["class_name"]].not_modelled(wrapped["config"], profile)
            if found:
                return found
        return None

    def output_shape(self, config, input_shape):
        forward, backward = config["layer"], config["backward_layer"]
        REGISTRY[backward["class_name"]].output_shape(backward["config"], input_shape)
        out = REGISTRY[forward["class_name"]].output_shape(forward["config"], input_shape)
        states = []
        if forward["config"]["return_state"]:
            out, states = out[0], out[1:]
        mode = config["merge_mode"]
        if mode is None:
            outputs = [out, out]
        elif mode == "concat":
            outputs = [out[:-1] + (2 * out[-1],)]
        else:
            outputs = [out]
        if not states and len(outputs) == 1:
            return outputs[0]
        return outputs + states + states

    def weights(self, config, input_shape):
        out = []
        for prefix, part in (("forward", config["layer"]), ("backward", config["backward_layer"])):
            for w in REGISTRY[part["class_name"]].weights(part["config"], input_shape):
                out.append(Weight(f"{prefix}_{w.name}", w.shape,
                                  trainable=w.trainable and part["trainable"]))
        return out

    def saved(self, config, input_shape, output_shape):
        """Both directions' buffers (each runs its own scan).  Under XLA the two loops run
        one after the other and read one time-major copy of the input, the backward one
        from its end: the backward direction adds no copy, and no scratch of its own while
        it runs where it matches the forward direction's (H100 plans of Embedding ->
        Bidirectional(LSTM(8)) and of a masked Bidirectional(GRU(8)), 20 steps, batch 32:
        one ``f32[20, 32, 16]`` in training and when predicting; of a Bidirectional(GRU(16))
        over 30 steps predicting: one direction's two ``f32[30, 32, 48]`` input projections
        at a time).  TensorFlow reverses the backward layer's input into a copy of its own."""
        out = []
        first_scratch = []
        for i, part in enumerate((config["layer"], config["backward_layer"])):
            kind = REGISTRY[part["class_name"]]
            for s in kind.saved(part["config"], input_shape,
                                kind.output_shape(part["config"], input_shape)):
                if i == 0 and s.when == "forward":
                    first_scratch.append(s)
                if i and (s.what == "time-major input" or (
                        s.when == "forward" and s in first_scratch)):
                    s = replace(s, profiles=tuple(p for p in s.profiles or PROFILE_NAMES
                                                  if p != "xla"))
                out.append(s)
        sequences = output_shape[0] if isinstance(output_shape, list) else output_shape
        if config["layer"]["config"].get("return_sequences") and sequences is not None \
                and config.get("merge_mode") != "concat":
            # each direction's own sequence, beside the one they are summed, averaged or
            # multiplied into while the call runs (a concatenation is the two of them)
            for part in (config["layer"], config["backward_layer"]):
                kind = REGISTRY[part["class_name"]]
                own = kind.output_shape(part["config"], input_shape)
                own = own[0] if isinstance(own, list) else own
                out.append(Saved("direction output", tuple(own), when="forward",
                                 profiles=NOT_TORCH))
        return [s for s in out if s.what not in ("input", "output")]
