"""Run these tests with single-threaded BLAS: on the shared 2-core CI box, OpenBLAS threads spinning against
other jobs made small Cholesky/matmul calls 10-30x slower (measured: 228 s vs 25 s for these tests)."""

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        yield
