"""memlint's side of a harness configuration: the setup a run uses, as memlint's IR."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from harness.keras_step import OPTIMIZERS


def setup_for(setup, config: dict):
    """``setup`` with the run's batch, mode, optimizer and precision."""
    from memlint.ir import OptimizerSpec

    _cls, _kwargs, name, options = OPTIMIZERS[config["optimizer"]]
    setup = replace(setup, batch_size=config["batch"], mode=config["mode"],
                    optimizer=OptimizerSpec(name, dict(options), "harness"),
                    dtype_policy=config.get("precision", "float32"))
    # the harness compiles every model with an MSE loss on every output
    # (keras_step.compile_for): targets shaped like the outputs
    fields = {f.name for f in dataclasses.fields(setup)}
    if "output_losses" in fields:
        setup = replace(setup, loss="mean_squared_error", loss_source="the harness's compile()",
                        output_losses=None)
    return setup
