# keras.io's "training loop from scratch" in JAX, with a wider MLP: one model's stateless call
# under jax.value_and_grad, the optimizer's stateless_apply, and the step jitted with a bare
# @jax.jit, which donates nothing: the step holds the state it is given beside the state it
# returns.  harness/shared_step_plan.py compiles it, and its twin that donates the state
# (the same text with ``@partial(jax.jit, donate_argnums=0)``).
import os

os.environ["KERAS_BACKEND"] = "jax"
import jax
import keras
import numpy as np

BATCH = 48
model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(4096, activation="relu"),
                          keras.layers.Dense(4096, activation="relu"), keras.layers.Dense(10)])
loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.Adam()
optimizer.build(model.trainable_variables)
x_train = np.zeros((4800, 784), "float32")
y_train = np.zeros((4800, 10), "float32")


def compute_loss_and_updates(trainable_variables, non_trainable_variables, x, y):
    y_pred, non_trainable_variables = model.stateless_call(
        trainable_variables, non_trainable_variables, x, training=True)
    return loss_fn(y, y_pred), non_trainable_variables


grad_fn = jax.value_and_grad(compute_loss_and_updates, has_aux=True)


@jax.jit
def train_step(state, x, y):
    trainable_variables, non_trainable_variables, optimizer_variables = state
    (loss, non_trainable_variables), grads = grad_fn(
        trainable_variables, non_trainable_variables, x, y)
    trainable_variables, optimizer_variables = optimizer.stateless_apply(
        optimizer_variables, grads, trainable_variables)
    return loss, (trainable_variables, non_trainable_variables, optimizer_variables)


def step_arguments(batch):
    """What one step is given besides the state: a batch of data."""
    return x_train[:batch], y_train[:batch]


state = ([v.value for v in model.trainable_variables],
         [v.value for v in model.non_trainable_variables],
         [v.value for v in optimizer.variables])
for start in range(0, len(x_train), BATCH):
    loss, state = train_step(state, *step_arguments(BATCH))
