"""The benchmark scripts still run: one cheap case of each mode, in a subprocess, and their output carries the
ours / scikit-learn ratios the records quote. Not a measurement (one round, a shared machine): a smoke run, so
that a change to core/ or to bench/datasets.py that breaks a script shows up before someone needs the figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NUM = r"\d+\.\d+"

pytestmark = pytest.mark.slow


def _bench(*args: str) -> str:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_realistic_quick_prints_a_table_with_ratios():
    out = _bench("bench/realistic.py", "--quick", "--only", "gnb_synth100k")
    assert re.search(rf"^gnb_synth100k +fit {NUM}/{NUM} = {NUM}x +predict {NUM}x", out, re.M), out
    row = re.search(rf"^\| gnb_synth100k \| [\d,]+ x 50 \| {NUM} \| {NUM} \| ({NUM}) \| ({NUM}) \|", out, re.M)
    assert row and all(float(v) > 0 for v in row.groups()), out
    assert re.search(rf"Fit geometric mean: all cases {NUM}x.*Batch predict geometric mean {NUM}x", out), out


def test_realistic_small_prints_ratios_per_set():
    out = _bench("bench/realistic.py", "--small", "--only", "perceptron", "--rounds", "1")
    rows = re.findall(rf"^\| perceptron \| (\w+) \| {NUM} \| {NUM} \| ({NUM}) \|$", out, re.M)
    assert {name for name, _ in rows} >= {"wine", "breast_cancer", "digits"}, out
    assert all(float(r) > 0 for _, r in rows)
    assert re.search(rf"Geometric mean per algorithm: perceptron {NUM}x", out), out


def test_trees_realistic_prints_ratios():
    out = _bench("bench/trees_realistic.py", "--rounds", "1", "--only", "dtc_wine")
    row = re.search(rf"^dtc_wine +178 x 13 +{NUM} +{NUM} +({NUM}) +({NUM}) +{NUM} +{NUM}$", out, re.M)
    assert row and all(float(v) > 0 for v in row.groups()), out
    assert re.search(rf"^fit ratio: geometric mean {NUM}, max {NUM}$", out, re.M), out
