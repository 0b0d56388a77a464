import pickle

import pytest

from core.context import NULL_CONTEXT, FitCancelled, FitContext


def test_progress_throttled_and_mapped_through_children():
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append((round(f, 3), m)), min_interval=0.0)
    child = ctx.child(0.5, 1.0)
    child.step(1, 2, loss=0.3)
    assert seen[-1] == (0.75, {"loss": 0.3})
    ctx2 = FitContext(on_progress=lambda f, m: seen.append(f), min_interval=3600)
    n = len(seen)
    for i in range(100):
        ctx2.step(i, 100)
    assert len(seen) - n == 1  # only the first, then throttled
    ctx2.step(100, 100)
    assert seen[-1] == 1.0  # completion always reported


def test_cancellation_raises_and_sticks():
    flag = {"c": False}
    ctx = FitContext(is_cancelled=lambda: flag["c"], cancel_interval=0.0)
    ctx.step(1, 10)
    flag["c"] = True
    with pytest.raises(FitCancelled):
        ctx.child(0, 0.5).step(2, 10)
    with pytest.raises(FitCancelled):
        ctx.check_cancelled()


def test_null_context_is_inert_and_picklable():
    NULL_CONTEXT.step(1, 2)
    assert isinstance(pickle.loads(pickle.dumps(NULL_CONTEXT)), FitContext)
