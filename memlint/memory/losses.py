"""What a loss function's backward makes, per backend profile.

Under torch (eager autograd) the loss's backward runs op by op, and at its busiest moment it
holds several buffers of the model output's size besides the gradient it returns: the
differences the forward kept, the chain rule's products (``pow_backward`` of a square makes
``x ** 1``, ``2 * that`` and ``grad * that`` at once).  Counted on a torch step of a 1x1
convolution with a [32, 64, 64, 3] output (the torch-step oracle, ``harness/torch_step.py``:
output-sized float32 buffers alive beyond the forward's at the peak, less the one gradient
the walk already counts; the walk puts the loss's forward and backward in one moment).  XLA
fuses the loss into a kernel or two; TensorFlow's graph mode is not calibrated here.

Loss names are Keras's canonical function names (the frontend maps ``"mse"``,
``keras.losses.MeanSquaredError()`` and the like onto them); a loss the table does not know
(a custom function, one not measured) takes the largest count, on the safe side.
"""

from __future__ import annotations

from typing import Optional

# canonical loss name -> output-sized float32 buffers beside the loss gradient (torch)
TORCH_BACKWARD_BUFFERS = {
    "mean_squared_error": 4,
    "mean_absolute_error": 3,
    "binary_crossentropy": 2,
    "huber": 5,
    "mean_squared_logarithmic_error": 5,
    "categorical_crossentropy": 5,  # 4 1/3: one per-position reduction is a third wide
    # from softmax probabilities over [32, 4096, 3] with integer targets: 5 2/3 output-sized
    # buffers in the loss's forward (division, clamp, log, copies), the step's peak
    "sparse_categorical_crossentropy": 5,
    "kl_divergence": 6,
    "poisson": 3,
}
UNKNOWN_LOSS_BUFFERS = max(TORCH_BACKWARD_BUFFERS.values())


def backward_buffers(loss: Optional[str]) -> int:
    """Output-sized float32 buffers the loss's eager backward holds beside its gradient."""
    if loss is None:
        return UNKNOWN_LOSS_BUFFERS
    return TORCH_BACKWARD_BUFFERS.get(loss, UNKNOWN_LOSS_BUFFERS)
