"""memlint's side of a harness configuration: the setup a run uses, as memlint's IR."""

from __future__ import annotations

from dataclasses import replace

from harness.keras_step import OPTIMIZERS


def setup_for(setup, config: dict):
    """``setup`` with the run's batch, mode, optimizer and precision."""
    from memlint.ir import OptimizerSpec

    _cls, _kwargs, name, options = OPTIMIZERS[config["optimizer"]]
    return replace(setup, batch_size=config["batch"], mode=config["mode"],
                   optimizer=OptimizerSpec(name, dict(options), "harness"),
                   dtype_policy=config.get("precision", "float32"))
