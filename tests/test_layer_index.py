"""The layer registry imports a family module only when one of its names is looked up, and
``memlint/layers/index.py`` names every layer each family registers (and nothing else)."""

from __future__ import annotations

import json
import subprocess
import sys

from memlint.layers import REGISTRY
from memlint.layers.index import FAMILIES


def test_the_index_lists_exactly_what_each_family_registers():
    registered = {name: type(kind).__module__.rsplit(".", 1)[1]
                  for name, kind in REGISTRY.items()}  # listing imports every family
    indexed = {name: family for family, names in FAMILIES.items() for name in names}
    missing = sorted(f'{family}: "{name}"' for name, family in registered.items()
                     if indexed.get(name) != family)
    stale = sorted(name for name in indexed if name not in registered)
    assert missing == [], "add to memlint/layers/index.py: " + ", ".join(missing)
    assert stale == [], "not registered by any family: " + ", ".join(stale)


PROBE = """
import json, sys
from memlint.layers import REGISTRY, lookup
steps = []
def families():
    return sorted(m.rsplit(".", 1)[1] for m in sys.modules
                  if m.startswith("memlint.layers.") and m not in (
                      "memlint.layers.base", "memlint.layers.index"))
steps.append(families())
steps.append([lookup("Conv2D") is not None, "Bogus" in REGISTRY, REGISTRY.get("Conv"),
              families()])
steps.append(["LSTM" in REGISTRY, families()])
steps.append([len(REGISTRY), len(families())])
print(json.dumps(steps))
"""


def test_a_lookup_imports_only_the_family_that_has_the_name():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True)
    start, first, second, listed = json.loads(done.stdout)
    assert start == []
    assert first == [True, False, None, ["convolutional"]]  # unknown names import nothing
    assert second == [True, ["convolutional", "rnn"]]
    assert listed == [len(REGISTRY), len(FAMILIES)]
