"""The measurement harness: the comparison table from recorded runs, and one tiny run on
the CPU with the JAX backend (skipped without JAX)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from harness import compare
from harness.measure import config_key, matrix, max_batch_configs, verdict_configs
from memlint.memory.estimate import MemoryBreakdown
from memlint.memory.profiles import XLA

# a cap of memlint's peak (1,000 bytes in these rows) plus the xla profile's margin
FIT_CAP = round(1000 * (1 + XLA.verdict_margin))


def _row(**kw):
    row = {"backend": "jax", "device": "NVIDIA H100", "fixture": "f.py", "model": "model",
           "batch": 8, "optimizer": "adam", "precision": "float32", "mode": "train",
           "kind": None, "status": "ok", "measured_peak": 1000, "memlint_peak": 1000}
    row.update(kw)
    return row


def test_compare_errors_and_verdicts(tmp_path):
    rows = [_row(memlint_peak=1030), _row(memlint_peak=900), _row(memlint_peak=1010),
            _row(backend="torch", memlint_peak=1200),
            # verdicts: said fits and ran; said fits and OOM (wrong); said no and OOM
            _row(kind="cap-fit", cap_bytes=FIT_CAP, status="ok", measured_peak=1050),
            _row(kind="cap-fit", cap_bytes=FIT_CAP, status="oom", measured_peak=None),
            _row(kind="cap-fail", cap_bytes=900, status="oom", measured_peak=None),
            _row(kind="cap-fail", cap_bytes=900, status="crash", measured_peak=None),
            # a cap under the peak with the xla profile's margin: too close to call
            _row(kind="cap-fit", cap_bytes=FIT_CAP - 1, status="oom", measured_peak=None)]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {(s["backend"], s["basis"]): s for s in compare.summarise(compare.load([path]))}
    jax = summary[("jax", "measured")]
    assert jax["runs"] == 3 and jax["median_abs_error"] == pytest.approx(0.03)
    assert jax["verdict_runs"] == 3
    assert jax["wrong_verdict_rate"] == pytest.approx(1 / 3)
    assert jax["fit_then_oom"] == 1 and jax["failed_runs"] == 1 and jax["too_close"] == 1
    assert summary[("torch", "measured")]["median_abs_error"] == pytest.approx(0.2)
    table = compare.markdown(compare.load([path]))
    assert "| jax | NVIDIA H100 | measured peak | 3 | 3.0% | 3 | 33.3% | 1 | 1 | 1 |" in table


def test_verdict_runs_not_held_to_their_cap_are_not_verdicts(tmp_path):
    rows = [_row(kind="cap-fail", cap_bytes=900, status="ok", measured_peak=None,
                 xla_plan={"peak": 950}),  # its own step needs more than the cap
            _row(kind="cap-fit", cap_bytes=FIT_CAP, status="ok", measured_peak=None),
            _row(kind="cap-fit", cap_bytes=FIT_CAP, status="oom", measured_peak=None),
            {**_row(status="error", measured_peak=None), "device": None}]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (summary,) = compare.summarise(compare.load([path]))
    assert summary["device"] == "NVIDIA H100"  # the failed run takes its file's device
    assert summary["verdict_runs"] == 1 and summary["cap_not_enforced"] == 2
    assert summary["failed_runs"] == 1 and summary["fit_then_oom"] == 1


def test_gpu_jax_rows_are_also_compared_with_the_plan_on_that_gpu():
    row = _row(measured_peak=2000, memlint_peak=1100, xla_plan={"peak": 1000})
    assert compare.relative_error(row) == (pytest.approx(-0.45), "measured")
    assert compare.plan_error(row) == pytest.approx(0.1)
    assert "XLA plan of the step on this GPU" in compare.markdown([row])


def test_cpu_rows_compare_with_the_xla_plan():
    row = _row(device="cpu", measured_peak=None, xla_plan={"peak": 800}, memlint_peak=880)
    error, basis = compare.relative_error(row)
    assert basis == "xla-plan" and error == pytest.approx(0.1)
    assert "XLA memory plan (CPU)" in compare.markdown([row])


def test_matrix_covers_optimizers_precisions_and_modes():
    configs = matrix("full", ["jax", "torch"])
    assert {c["optimizer"] for c in configs} == {"sgd", "sgd_momentum", "adam", "adamw",
                                                  "rmsprop", "adagrad"}
    assert {c["precision"] for c in configs} == {"float32", "mixed_float16"}
    assert {c["mode"] for c in configs} == {"train", "infer"}
    assert len(configs) >= 80 and len({config_key(c) for c in configs}) == len(configs)


def test_matrix_alternates_backends_model_by_model():
    configs = matrix("full", ["jax", "torch"])
    half = configs[:len(configs) // 2]
    assert {c["backend"] for c in configs[:20]} == {"jax", "torch"}
    assert abs(sum(c["backend"] == "jax" for c in half) - len(half) / 2) <= 8


def test_verdict_and_max_batch_runs():
    row = _row(memlint_peak=1_000_000)  # jax: the xla profile's margin
    cap = FIT_CAP * 1000
    fit, fail = verdict_configs(row)
    assert fit["cap_bytes"] == cap and fail["cap_bytes"] == 900_000
    b = MemoryBreakdown(mode="train", batch_size=8, fixed_bytes=200_000,
                        per_sample_bytes=100_000)
    best, bigger = max_batch_configs(row, b)
    # the cap less the margin is 1,000,000: batch 8; the first batch whose peak
    # (200,000 + 100,000 per sample) is over the cap is where memlint says it does not fit
    first_over = (cap - 200_000) // 100_000 + 1
    assert best["batch"] == 8 and bigger["batch"] == max(9, first_over)
    assert best["cap_bytes"] == bigger["cap_bytes"] == cap


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None
                    or importlib.util.find_spec("keras") is None,
                    reason="jax and keras are needed for a CPU run (pip install jax keras)")
def test_one_tiny_cpu_run(tmp_path):
    from harness import measure

    out = tmp_path / "cpu.jsonl"
    assert measure.main(["--backends", "jax", "--matrix", "tiny", "--cpu", "--limit", "1",
                         "--steps", "1", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["status"] == "ok", row.get("error")
    assert row["measured_peak"] is None and row["cuda"] is None  # GPU-only fields
    assert row["xla_plan"]["peak"] > 0 and row["memlint_profile"] == "xla"
    assert row["memlint_parts"]["weights"] > 0
    # resumable: the same run is not repeated
    assert measure.main(["--backends", "jax", "--matrix", "tiny", "--cpu", "--limit", "1",
                         "--steps", "1", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2  # the next configuration, not the first
    assert os.path.getsize(out) > 0


@pytest.mark.skipif(importlib.util.find_spec("jax") is None
                    or importlib.util.find_spec("keras") is None,
                    reason="needs jax and keras (pip install -e '.[proxy]')")
def test_random_targets_follow_the_sizes_the_inputs_give_the_outputs():
    """A decoder whose steps are left open: the inputs take the sizes the fixture's data
    gave (encoder 5 steps, decoder 7), and the targets the decoder's 7, not a default."""
    import subprocess
    import sys

    script = (
        "import keras\nfrom keras import layers\n"
        "from harness.keras_step import random_batch\n"
        "enc = keras.Input((None, 3)); dec = keras.Input((None, 4))\n"
        "_, h, c = layers.LSTM(6, return_state=True)(enc)\n"
        "seq = layers.LSTM(6, return_sequences=True)(dec, initial_state=[h, c])\n"
        "model = keras.Model([enc, dec], layers.Dense(2)(seq))\n"
        "x, y = random_batch(model, 2, input_shapes=[[5, 3], [7, 4]])\n"
        "print([a.shape for a in x], y.shape)\n")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=os.path.dirname(os.path.dirname(__file__)), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[(2, 5, 3), (2, 7, 4)] (2, 7, 2)"


def test_jax_on_a_gpu_is_measured_in_a_second_process_sharing_the_compilation_cache(
        monkeypatch):
    from harness import measure

    calls = []

    def fake_run(argv, **kwargs):
        calls.append(json.loads(argv[-1]))

        class Done:
            stdout = json.dumps({"status": "ok", "peak_bytes": 1000}) + "\n"
            stderr, returncode = "", 0
        return Done()

    monkeypatch.setattr(measure.subprocess, "run", fake_run)
    config = {"backend": "jax", "cap_bytes": 5000, "steps": 3, "cpu": False}
    result = measure.run_child(config, 100)
    warm, measured = calls
    assert warm["compilation_cache"] == measured["compilation_cache"]
    assert warm["cap_bytes"] is None and measured["cap_bytes"] == 5000
    assert measured["steps"] == 3 and result["compile_cache_warmed"]
    calls.clear()
    measure.run_child({**config, "backend": "torch"}, 100)
    measure.run_child({**config, "cpu": True}, 100)
    assert len(calls) == 2 and not any("compilation_cache" in c for c in calls)


def test_child_processes_keep_the_callers_pythonpath(monkeypatch):
    # on a GPU machine Keras is carried as wheels on PYTHONPATH: a child that sees only the
    # repository finds no Keras (the first GPU call recorded nothing for this)
    from harness import gpu_plan, measure

    monkeypatch.setenv("PYTHONPATH", "/carried/site")
    for env in (gpu_plan.child_env(), gpu_plan.child_env(on_device=True)):
        assert env["PYTHONPATH"].split(os.pathsep) == [str(gpu_plan.ROOT), "/carried/site"]
    seen = []

    def fake_run(argv, **kwargs):
        seen.append(kwargs["env"]["PYTHONPATH"])

        class Done:
            stdout, stderr, returncode = '{"status": "ok"}\n', "", 0
        return Done()

    monkeypatch.setattr(measure.subprocess, "run", fake_run)
    measure.run_child({"backend": "torch", "cpu": True}, 10)
    assert seen == [os.pathsep.join([str(measure.ROOT), "/carried/site"])]


def test_library_calls_keep_what_each_custom_call_returns():
    from harness import device_rnn, gpu_plan

    class Compiled:
        @staticmethod
        def as_text():
            return ('  %c = (f32[8,64]{1,0}, f32[1,8,64]{2,1,0}, u8[33554432]{0}, u8[4096]{0}) '
                    'custom-call(f32[8,16,32]{2,1,0} %x), custom_call_target="cudnn_rnn_ffi"\n'
                    '  %d = (f32[8,64]{1,0}, s8[4194304]{0}) custom-call(%a, %b), '
                    'custom_call_target="__cublas$lt$matmul"\n')

    calls = gpu_plan.library_calls(Compiled)
    assert calls == [{"target": "cudnn_rnn_ffi",
                      "outputs": "(f32[8,64], f32[1,8,64], u8[33554432], u8[4096])"},
                     {"target": "__cublas$lt$matmul", "outputs": "(f32[8,64], s8[4194304])"}]
    assert device_rnn.rnn_scratch({"library_calls": calls}) == 33554432 + 4096


def test_rnn_sweep_covers_the_grid_smallest_first(tmp_path):
    from harness import device_rnn

    points = device_rnn.models()
    assert len(points) == 2 * 3 * 2 * 2
    sizes = [p["units"] * p["steps"] for p in points]
    assert sizes == sorted(sizes)
    (path,) = device_rnn.write_sources(points[:1], tmp_path)
    assert "layers.LSTM(32)" in path.read_text() or "layers.GRU(32)" in path.read_text()
