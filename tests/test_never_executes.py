"""memlint never imports or executes the code it analyses, nor TensorFlow."""

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_analysis_runs_nothing_and_imports_no_framework(tmp_path):
    marker = tmp_path / "executed"
    victim = tmp_path / "model.py"
    victim.write_text(
        "import os\n"
        f"os.system('touch {marker}')\n"
        f"open({str(marker)!r}, 'w').write('x')\n"
        "__import__('subprocess').run(['true'])\n"
        "import keras\n"
        "model = keras.Sequential([keras.layers.Dense(4, input_shape=(8,))])\n"
        "exec('print(1)')\n"
        "eval('2 + 2')\n")
    code = (
        "import sys\n"
        "from memlint.cli import main\n"
        f"rc = main(['check', {str(victim)!r}, '--gpu', '8GiB'])\n"
        "bad = [m for m in ('tensorflow', 'keras', 'torch', 'jax') if m in sys.modules]\n"
        "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


def test_pathological_input_stops_within_its_bounds():
    """Bounded by work units, not by a clock: the loop runs at most MAX_LOOP_ITERATIONS
    times, the whole file at most MAX_STEPS steps, the huge power and string are never
    built (nothing allocated), and MEM903 says a bound was hit."""
    from memlint.analysis import analyze_text
    from memlint.config import Settings
    from memlint.frontends.keras import work_bounds

    source = ("import keras\n"
              "m = keras.Sequential()\n"
              "for i in range(10**12):\n"
              "    m.add(keras.layers.Dense(2))\n"
              "x = 10 ** 10 ** 10\n"
              "s = 'a' * 10**12\n")
    report = analyze_text(source, "p.py", Settings())
    bounds, work = work_bounds(), report.work
    assert work["parsed"] == 1
    assert 0 < work["steps"] <= bounds["steps"]
    assert work["loop_iterations"] == bounds["loop_iterations"]  # stopped at its cap
    assert work["allocated"] == 0  # neither 10**10**10 nor 'a' * 10**12 was built
    assert any(d.code == "MEM903" for d in report.diagnostics)
