"""A training step that runs several models, or one model several times, under one tape:
each model's estimate is of its own call (a lower bound), and the step they share gets an
upper bound (``memlint/memory/shared_steps.py``) that can give a "fits" verdict.

* The bound against XLA's plan of such a step (a GAN's generator once and its critic twice
  under one ``jax.value_and_grad``) compiled for described GPUs without a GPU
  (``harness/shared_step_plan.py``, data in ``tests/data/shared_step_plans.json``): memlint's
  side recomputed must equal what is stored (after a change to memlint: ``python -m
  harness.shared_step_plan --refresh-memlint``), and the bound must be over every plan; the
  same for one model's JAX step whose ``jax.jit`` donates nothing, and its twin that donates
  the state (``TrainingSetup.state_kept``).
* With jax and the CUDA plugin, one stored row (chosen by the date) is compiled again and
  must match the stored plan within 1%.
"""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from harness import shared_step_plan as ssp
from memlint.analysis import analyze_text
from memlint.config import Settings
from memlint.memory.verdict import FITS, UNKNOWN, verdict
from tests.gpuplan_support import require_gpuplan

# TensorFlow's DCGAN tutorial, smaller: one tape block runs the generator once and the
# discriminator twice
DCGAN = '''
import tensorflow as tf
from tensorflow.keras import layers

BATCH = 128
(images, _), _ = tf.keras.datasets.mnist.load_data()
dataset = tf.data.Dataset.from_tensor_slices(images.reshape(-1, 28, 28, 1) / 255.0).batch(BATCH)
generator = tf.keras.Sequential([
    layers.Dense(7 * 7 * 64, input_shape=(100,)), layers.LeakyReLU(), layers.Reshape((7, 7, 64)),
    layers.Conv2DTranspose(32, 5, strides=2, padding="same"), layers.LeakyReLU(),
    layers.Conv2DTranspose(1, 5, strides=2, padding="same", activation="tanh")])
discriminator = tf.keras.Sequential([
    layers.Conv2D(32, 5, strides=2, padding="same", input_shape=(28, 28, 1)), layers.LeakyReLU(),
    layers.Flatten(), layers.Dense(1)])
g_opt = tf.keras.optimizers.Adam(1e-4)
d_opt = tf.keras.optimizers.Adam(1e-4)

@tf.function
def train_step(real):
    noise = tf.random.normal([BATCH, 100])
    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
        fake = generator(noise, training=True)
        real_out = discriminator(real, training=True)
        fake_out = discriminator(fake, training=True)
        g_loss = -tf.reduce_mean(fake_out)
        d_loss = tf.reduce_mean(fake_out) - tf.reduce_mean(real_out)
    g_opt.apply_gradients(zip(g_tape.gradient(g_loss, generator.trainable_variables),
                              generator.trainable_variables))
    d_opt.apply_gradients(zip(d_tape.gradient(d_loss, discriminator.trainable_variables),
                              discriminator.trainable_variables))

for batch in dataset:
    train_step(batch)
'''


def _report(source: str, gpu: str = "8GiB", **settings):
    return analyze_text(textwrap.dedent(source).lstrip("\n"), "gan.py",
                        Settings(gpu=gpu, **settings))


def test_the_step_a_gan_shares_is_bounded_by_the_sum_of_its_calls():
    report = _report(DCGAN)
    g, d = report.breakdowns
    assert [m.name for m in report.models] == ["sequential", "sequential_1"]
    assert g.shared_step and not g.complete  # each estimate is of one call: a lower bound
    passed = {"sequential": 4 * 128 * (100 + 28 * 28), "sequential_1": 4 * 128 * (28 * 28 + 1)}
    expected = g.peak + 2 * passed["sequential"] + 2 * (d.peak + 2 * passed["sequential_1"])
    assert g.shared_bound == d.shared_bound == expected
    assert "sequential + sequential_1 x 2" in g.shared_bound_source
    result = verdict(g, report.budget)
    assert (result.status, result.bound, result.lower_bound) == (FITS, expected, True)
    assert not [x for x in report.diagnostics if x.code == "MEM005"]
    from memlint.reporters.json_format import document
    [first, _] = document([report], [])["models"]
    assert (first["verdict"], first["peak_is_lower_bound"]) == ("fits", True)
    assert first["shared_step_bound"] == expected and first["shared_step_bound_source"]
    from memlint.reporters.text import model_report
    lines = model_report(report.models[0], g, report.budget)
    assert any(line.startswith("  shared step:  at most ") for line in lines)


def test_a_bound_that_does_not_fit_leaves_the_verdict_unknown():
    g = _report(DCGAN).breakdowns[0]
    # a card where this call alone fits but the bound, with the margin, does not
    mib = (g.peak + g.shared_bound) // 2 // 2**20
    report = _report(DCGAN, f"{mib}MiB", cuda_context="0", reserve="0")
    assert g.peak < report.budget.usable < g.shared_bound
    result = verdict(report.breakdowns[0], report.budget)
    assert result.status == UNKNOWN and result.bound == g.shared_bound
    [note] = [x.message for x in report.diagnostics
              if x.code == "MEM005" and x.model == "sequential"]
    assert "The step it shares comes to at most" in note
    assert "whether the step fits is unknown" in note


def test_no_bound_where_a_model_of_the_step_is_not_sized():
    # the discriminator's input size is not known: nothing bounds the step
    source = DCGAN.replace("input_shape=(28, 28, 1)", "input_shape=(None, None, 1)").replace(
        "images.reshape(-1, 28, 28, 1)", "images")
    report = _report(source)
    assert all(b.shared_step and b.shared_bound is None for b in report.breakdowns)
    assert all(verdict(b, report.budget).status == UNKNOWN for b in report.breakdowns)


@pytest.fixture(scope="module")
def stored() -> dict:
    return ssp.load()


@pytest.mark.gpuplan
def test_memlint_against_xla_plans_of_jax_steps_of_the_codes_own(stored):
    """The GAN's shared step: the bound over every plan, within 30%; one model's step whose
    jit donates nothing (keras.io's JAX loop, a bare ``@jax.jit``) and its twin that
    donates the state: memlint's peak within 5% (the one that donates nothing was 35%
    under while memlint took every JAX step for donated)."""
    assert {(r["script"], r["target"], r["batch"]) for r in stored["rows"]} == set(ssp.ROWS)
    for row in stored["rows"]:
        now = ssp.memlint_side(row["script"], row["target"], row["batch"])
        label = f"{row['script']} {row['target']} {row['batch']}"
        assert now == row["memlint"], (
            f"memlint's side of {label} changed: run `python -m harness.shared_step_plan "
            "--refresh-memlint`")
        peak = row["plan"]["peak"]
        if len(now["peaks"]) > 1:  # a step several models share
            bound = now["bound"]
            print(f"{label}: XLA {peak:,}, bound {bound:,} ({bound / peak - 1:+.1%})")
            assert peak <= bound <= 1.3 * peak, label
            # each model's call alone is below the step: the bound is what gives a verdict
            assert max(now["peaks"].values()) < bound
        else:
            [estimate] = now["peaks"].values()
            print(f"{label}: XLA {peak:,}, memlint {estimate:,} ({estimate / peak - 1:+.1%})")
            assert abs(estimate / peak - 1) <= 0.05, label


@pytest.mark.gpuplan
def test_a_stored_plan_of_the_step_recompiles_to_the_same_figures(stored):
    require_gpuplan()
    row = stored["rows"][dt.date.today().toordinal() % len(stored["rows"])]
    fresh = ssp.compile_row(row["script"], row["target"], row["batch"])
    for key in ("argument", "output", "alias", "temp", "peak"):
        a, b = row["plan"][key], fresh[key]
        assert abs(a - b) <= 0.01 * max(a, 1), f"{row['target']} {row['batch']} {key}: {a} {b}"


def test_a_gradient_penalty_tape_inside_the_step_gives_no_bound():
    # a WGAN-GP's critic differentiated twice: the inner tape's backward is kept for the
    # outer one's, which no call's own peak counts: no bound and no verdict, for the step
    # of both models and for one that runs the critic alone
    source = DCGAN.replace(
        "        fake_out = discriminator(fake, training=True)\n",
        "        fake_out = discriminator(fake, training=True)\n"
        "        with tf.GradientTape() as gp_tape:\n"
        "            gp_tape.watch(real)\n"
        "            gp_out = discriminator(real, training=True)\n"
        "        penalty = tf.reduce_mean(gp_tape.gradient(gp_out, real) ** 2)\n")
    report = _report(source)
    for breakdown in report.breakdowns:
        assert "gradients of gradients" in breakdown.shared_step
        assert breakdown.shared_bound is None
        assert verdict(breakdown, report.budget).status == UNKNOWN
    alone = _report(source.replace("        fake = generator(noise, training=True)\n",
                                   "        fake = real\n"))
    critic = alone.breakdowns[[m.name for m in alone.models].index("sequential_1")]
    assert not critic.complete and "gradients of gradients" in critic.shared_step
    single = _report(textwrap.dedent('''
        import tensorflow as tf
        critic = tf.keras.Sequential([tf.keras.layers.Dense(8, input_shape=(4,))])
        data = tf.zeros((64, 4))
        with tf.GradientTape() as tape:
            with tf.GradientTape() as inner:
                inner.watch(data)
                out = critic(data, training=True)
            loss = tf.reduce_mean(inner.gradient(out, data) ** 2)
        '''))
    [one] = single.breakdowns  # one call: it had a step of its own, taken as complete
    assert not one.complete and "gradients of gradients" in one.shared_step
