"""XLA's liveness read from its dump (harness/xla_liveness.py): the most bytes of a step's
temporaries alive at once, and the tables that set memlint against it.  Pure text parsing on
small hand-written dumps shaped like jaxlib 0.10.2's; no JAX needed."""

from __future__ import annotations

from harness import gpu_plan_table
from harness.xla_liveness import live_ranges, live_temp, max_live, temp_values

ASSIGNMENT = """BufferAssignment:
allocation 0: size 4096, parameter 0, shape |f32[32,32]| at ShapeIndex {}, maybe-live-out:
 value: <1 state_0__0_.1 @0> (size=4096,offset=0): f32[32,32]{1,0}
 value: <9 update @0> (size=4096,offset=0): f32[32,32]{1,0}
allocation 1: size 16, output shape is |(f32[32,32])|, maybe-live-out:
 value: <10 tuple{} @0> (size=16,offset=0): (f32[32,32])
allocation 2: size 3072, preallocated-temp:
 value: <2 dot @0> (size=1024,offset=0): f32[16,16]{1,0}
 value: <3 relu @0> (size=1024,offset=0): f32[16,16]{1,0}
 value: <4 grad @0> (size=2048,offset=1024): f32[16,32]{1,0}
 value: <5 pair{0} @0> (size=1024,offset=1024): f32[16,16]{1,0}
 value: <6 pair{} @0> (size=16,offset=3056): (f32[16,16], f32[16,16])

Total bytes used: 7184 (7.0KiB)
"""

LIVE_RANGE = """HloLiveRange (max 9):
  InstructionSequence:
    0:state_0__0_.1
  BufferLiveRange:
    state_0__0_.1{}:0-4
    dot{}:1-2
    relu{}:2-3
    grad{}:3-5
    pair{0}:6-7
    pair{}:6-7
    update{}:5-9
  Live ranges at 3 (peak):
    grad{}: 2048 bytes (cumulative: 2048 bytes)
"""


def test_only_the_temporary_allocation_s_values_are_read():
    values = temp_values(ASSIGNMENT)
    assert values == {"dot": (0, 1024), "relu": (0, 1024), "grad": (1024, 2048),
                      "pair{0}": (1024, 1024), "pair{}": (3056, 16)}


def test_live_ranges_name_arrays_without_braces_and_tuple_elements_with_their_index():
    ranges = live_ranges(LIVE_RANGE)
    assert ranges["dot"] == (1, 2) and ranges["pair{0}"] == (6, 7) and ranges["pair"] == (6, 7)
    assert "grad{}" not in ranges and len(ranges) == 7  # the "peak" listing is not read


def test_a_value_written_over_the_one_it_replaces_is_counted_once():
    # dot and relu share bytes 0..1024 and meet at position 2: 1024 bytes, then relu and
    # grad side by side at position 3: 3072
    assert max_live({"dot": (0, 1024), "relu": (0, 1024)}, {"dot": (1, 2), "relu": (2, 3)}) \
        == 1024
    assert max_live(temp_values(ASSIGNMENT), live_ranges(LIVE_RANGE)) == 3072
    # values alive at different times never add up
    assert max_live({"a": (0, 1024), "b": (1024, 2048)}, {"a": (0, 1), "b": (2, 3)}) == 2048
    assert max_live({"a": (0, 1024)}, {}) == 0  # no live range: a nested computation's value


def test_live_temp_reads_the_module_s_files(tmp_path):
    stem = "module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations"
    (tmp_path / f"{stem}-buffer-assignment.txt").write_text(ASSIGNMENT)
    (tmp_path / f"{stem}-live-range.txt").write_text(LIVE_RANGE)
    assert live_temp(tmp_path, "train_step") == 3072
    assert live_temp(tmp_path, "predict_step") is None


def _row(peak_temp, live, memlint_peak):
    plan = {"argument": 1000, "output": 500, "alias": 400, "temp": peak_temp,
            "live_temp": live}
    plan["peak"] = plan["argument"] + plan["output"] - plan["alias"] + plan["temp"]
    return {"target": "h100", "part": "base", "fixture": "fixtures/x.py", "model": "m",
            "batch": 4, "plan": plan,
            "memlint": {"peak": memlint_peak, "parts": {"weights": 1000}},
            "relative_error": (memlint_peak - plan["peak"]) / plan["peak"]}


def test_the_tables_part_a_miss_into_the_walk_and_the_packing():
    row = _row(peak_temp=900, live=600, memlint_peak=1700)  # XLA peak 2000, liveness 1700
    assert gpu_plan_table.live_peak(row) == 1700
    assert gpu_plan_table.packing(row) == 0.15
    assert gpu_plan_table.live_error(row) == 0.0
    s = gpu_plan_table.summary([row, _row(900, 900, 1900)])
    assert s["live_n"] == 2 and s["packing_max"] == 0.15 and s["live_under5"] == 0
    lines = gpu_plan_table.liveness_lines({"rows": [row]})
    assert lines and lines[-1].startswith("| h100, train | 1 | 0.0% |")
    old = _row(900, None, 1700)  # a row stored before the liveness was kept
    assert gpu_plan_table.live_peak(old) is None and gpu_plan_table.liveness_lines(
        {"rows": [old]}) == []
