"""memlint's side of a harness configuration: the setup a run uses, as memlint's IR."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from harness.keras_step import OPTIMIZERS

HARNESS_LOSS = "mean_squared_error"  # keras_step.compile_for compiles every model with "mse"


def with_harness_loss(setup):
    """``setup`` with the loss the harness compiles every model with, MSE on every output
    (:func:`harness.keras_step.compile_for`): targets shaped like the outputs.  Fields an
    older memlint's setup lacks (the stored baseline, run from its commit) are left out."""
    fields = {f.name for f in dataclasses.fields(setup)}
    if "loss" in fields:
        setup = replace(setup, loss=HARNESS_LOSS, loss_source="the harness's compile()")
    if "output_losses" in fields:
        setup = replace(setup, output_losses=None)
    return setup


def setup_for(setup, config: dict):
    """``setup`` with the run's batch, mode, optimizer and precision."""
    from memlint.ir import OptimizerSpec

    _cls, _kwargs, name, options = OPTIMIZERS[config["optimizer"]]
    setup = replace(setup, batch_size=config["batch"], mode=config["mode"],
                    optimizer=OptimizerSpec(name, dict(options), "harness"),
                    dtype_policy=config.get("precision", "float32"))
    return with_harness_loss(setup)
