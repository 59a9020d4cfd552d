# A GAN trained by a JAX loop of its own: one jax.value_and_grad runs the generator once and
# the critic twice (on real and on generated images) with Keras's stateless calls, and one
# jitted step, its state donated, applies both optimizers.  memlint estimates each model's
# call alone and bounds the step they share (memlint/memory/shared_steps.py);
# harness/shared_step_plan.py compiles this step for described GPUs to check the bound.
import os

os.environ["KERAS_BACKEND"] = "jax"
from functools import partial

import jax
import keras
import numpy as np
from keras import layers

BATCH = 64
LATENT = 128

generator = keras.Sequential([
    keras.Input((LATENT,)),
    layers.Dense(7 * 7 * 128),
    layers.LeakyReLU(0.2),
    layers.Reshape((7, 7, 128)),
    layers.Conv2DTranspose(128, 4, strides=2, padding="same"),
    layers.LeakyReLU(0.2),
    layers.Conv2DTranspose(128, 4, strides=2, padding="same"),
    layers.LeakyReLU(0.2),
    layers.Conv2D(1, 7, padding="same", activation="sigmoid"),
], name="generator")
critic = keras.Sequential([
    keras.Input((28, 28, 1)),
    layers.Conv2D(64, 3, strides=2, padding="same"),
    layers.LeakyReLU(0.2),
    layers.Conv2D(128, 3, strides=2, padding="same"),
    layers.LeakyReLU(0.2),
    layers.GlobalMaxPooling2D(),
    layers.Dense(1),
], name="critic")
g_opt = keras.optimizers.Adam(1e-4)
c_opt = keras.optimizers.Adam(1e-4)
g_opt.build(generator.trainable_variables)
c_opt.build(critic.trainable_variables)
images = np.zeros((6400, 28, 28, 1), "float32")


def loss_fn(g_vars, c_vars, g_rest, c_rest, real, noise):
    fake, g_rest = generator.stateless_call(g_vars, g_rest, noise, training=True)
    real_score, c_rest = critic.stateless_call(c_vars, c_rest, real, training=True)
    fake_score, c_rest = critic.stateless_call(c_vars, c_rest, fake, training=True)
    loss = keras.ops.mean(real_score) - keras.ops.mean(fake_score)
    return loss, (g_rest, c_rest)


grad_fn = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)


@partial(jax.jit, donate_argnums=0)
def train_step(state, real, noise):
    g_vars, c_vars, g_rest, c_rest, g_slots, c_slots = state
    (loss, (g_rest, c_rest)), (g_grads, c_grads) = grad_fn(g_vars, c_vars, g_rest, c_rest,
                                                           real, noise)
    g_vars, g_slots = g_opt.stateless_apply(g_slots, g_grads, g_vars)
    c_vars, c_slots = c_opt.stateless_apply(c_slots, c_grads, c_vars)
    return loss, (g_vars, c_vars, g_rest, c_rest, g_slots, c_slots)


def step_arguments(batch):
    """What one step is given besides the state: real images and noise."""
    return images[:batch], np.random.normal(size=(batch, LATENT)).astype("float32")


state = ([v.value for v in generator.trainable_variables],
         [v.value for v in critic.trainable_variables],
         [v.value for v in generator.non_trainable_variables],
         [v.value for v in critic.non_trainable_variables],
         [v.value for v in g_opt.variables], [v.value for v in c_opt.variables])
for start in range(0, len(images), BATCH):
    loss, state = train_step(state, *step_arguments(BATCH))
