"""The model cache: measured sizes, the eviction rule, one load per cold model, metrics, delete under load."""

import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.services.inference import measured_nbytes
from tests.service.conftest import iris_csv, train, upload_csv, wait_job, while_paused
from tests.service.test_observability import scrape


def test_measured_nbytes_counts_buffers_once_and_views_through_their_base():
    a = np.zeros(1_000_000)  # 8 MB
    obj = {"a": a, "view": a[::2], "again": a, "small": [1, 2, 3], "nested": {"b": np.ones(10_000, dtype=np.float32)}}
    n = measured_nbytes(obj)
    assert 8_000_000 + 40_000 <= n < 8_000_000 + 40_000 + 10_000

    class Holder:
        def __init__(self):
            self.x = np.empty((100, 100))
            self.children = [np.empty(1000) for _ in range(3)]

    assert measured_nbytes(Holder()) >= 80_000 + 24_000


@pytest.fixture
def app_client(tmp_path):
    from service.settings import Settings

    s = Settings(data_dir=tmp_path / "data", workers=0, secret_key="test-secret")
    with TestClient(create_app(s)) as c:
        yield c


def _models(client, n):
    ds = upload_csv(client, iris_csv()).json()["id"]
    ids = []
    for i in range(n):
        mid, job = train(client, algorithm="random_forest_classifier", dataset_id=ds, target="species",
                         params={"n_estimators": 5 + i, "random_state": i})
        assert job["status"] == "succeeded", job
        ids.append(mid)
    return ids


ROW = {"instances": [{"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}]}


def test_lru_by_measured_size_and_an_oversize_model_evicts_nothing(app_client):
    cache = app_client.app.state.runtime.cache
    a, b, c = _models(app_client, 3)
    sizes = {}
    for mid in (a, b, c):
        assert app_client.post(f"/v1/models/{mid}/predict", json=ROW).status_code == 200
        sizes[mid] = measured_nbytes(app_client.app.state.runtime.art.load_bundle(mid))  # as loaded
    # charged its measured size (to the few bytes of objects shared between walks), not a multiple of the file
    assert cache.size_bytes == pytest.approx(sum(sizes.values()), rel=0.01)
    # a budget that holds two of the three: the least recently used goes
    cache.evict(a), cache.evict(b), cache.evict(c)
    cache.max_bytes = sizes[a] + sizes[b] + sizes[c] - min(sizes.values()) // 2
    for mid in (a, b, c):
        app_client.post(f"/v1/models/{mid}/predict", json=ROW)
    assert a not in cache and b in cache and c in cache
    assert cache.size_bytes <= cache.max_bytes
    # a budget that holds only the smallest model: the larger ones are served from the oversize slot, one at a
    # time, and never evict the small one
    small, mid_, large = sorted(sizes, key=sizes.get)
    for m in sizes:
        cache.evict(m)
    cache.max_bytes = sizes[small] + 100
    loads, evictions = cache.loads, cache.evictions
    for m in (small, mid_, large, mid_, small):
        assert app_client.post(f"/v1/models/{m}/predict", json=ROW).status_code == 200
        assert small in cache
    assert cache.loads == loads + 4 and cache.evictions == evictions + 2  # mid, large, mid: two replacements
    assert mid_ in cache and large not in cache
    metrics = app_client.get("/metrics").text
    for name in ("orchard_model_cache_loads_total", "orchard_model_cache_evictions_total",
                 "orchard_model_cache_load_seconds_total", "orchard_model_cache_size_bytes"):
        assert name in metrics


def test_a_hit_makes_a_model_recent_so_the_least_recently_used_goes_not_the_first_loaded(app_client):
    """Loaded a, b, c in that order, then a used again: loading d evicts b (least recently used), not a (first
    loaded, as a FIFO would)."""
    cache = app_client.app.state.runtime.cache
    a, b, c, d = _models(app_client, 4)
    sizes = {}
    for mid in (a, b, c, d):  # each model's charge, as the cache measures it
        for m in (a, b, c, d):
            cache.evict(m)
        assert app_client.post(f"/v1/models/{mid}/predict", json=ROW).status_code == 200
        sizes[mid] = cache.size_bytes
    for m in (a, b, c, d):
        cache.evict(m)
    # room for a, b, c and for a, c, d; never for all four: d's load evicts exactly one model
    cache.max_bytes = max(sizes[a] + sizes[b] + sizes[c], sizes[a] + sizes[c] + sizes[d]) + 1000
    assert sum(sizes.values()) > cache.max_bytes
    for mid in (a, b, c):
        assert app_client.post(f"/v1/models/{mid}/predict", json=ROW).status_code == 200
    assert a in cache and b in cache and c in cache
    loads = cache.loads
    assert app_client.post(f"/v1/models/{a}/predict", json=ROW).status_code == 200  # a hit: a is now the most recent
    assert cache.loads == loads
    assert app_client.post(f"/v1/models/{d}/predict", json=ROW).status_code == 200
    assert a in cache and b not in cache and c in cache and d in cache
    assert cache.size_bytes <= cache.max_bytes
    # the same through /v2 (a hit by its id): c used, then b loaded again: a goes, c stays
    r = app_client.post(f"/v2/models/{c}/infer", json={"inputs": [
        {"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]})
    assert r.status_code == 200, r.text
    assert app_client.post(f"/v1/models/{b}/predict", json=ROW).status_code == 200
    assert b in cache and c in cache and a not in cache


def _cache_metrics(client) -> dict:
    m = scrape(client)
    return {k: m[(f"orchard_model_cache_{k}", ())] for k in (
        "loads_total", "evictions_total", "load_seconds_total", "hits_total", "misses_total", "size_bytes", "models")}


def test_metrics_count_loads_evictions_and_load_time_as_they_happen(app_client):
    """The values scraped from /metrics follow the cache: a cold load adds one load and its seconds, a hit adds
    neither, a model evicted to fit the budget adds one eviction; size and model count are the cache's."""
    cache = app_client.app.state.runtime.cache
    a, b = _models(app_client, 2)
    sizes = {}
    for m in (a, b):
        cache.evict(a), cache.evict(b)
        assert app_client.post(f"/v1/models/{m}/predict", json=ROW).status_code == 200
        sizes[m] = cache.size_bytes
    cache.evict(a), cache.evict(b)
    before = _cache_metrics(app_client)
    assert before["size_bytes"] == 0 and before["models"] == 0
    assert app_client.post(f"/v1/models/{a}/predict", json=ROW).status_code == 200
    after_a = _cache_metrics(app_client)
    assert after_a["loads_total"] == before["loads_total"] + 1 and after_a["misses_total"] == before["misses_total"] + 1
    assert after_a["load_seconds_total"] > before["load_seconds_total"]
    assert after_a["evictions_total"] == before["evictions_total"]
    assert after_a["models"] == 1 and after_a["size_bytes"] == cache.size_bytes > 0
    assert app_client.post(f"/v1/models/{a}/predict", json=ROW).status_code == 200  # a hit
    hit = _cache_metrics(app_client)
    assert hit["hits_total"] > after_a["hits_total"]
    assert {k: hit[k] for k in ("loads_total", "load_seconds_total", "evictions_total", "size_bytes")} == \
        {k: after_a[k] for k in ("loads_total", "load_seconds_total", "evictions_total", "size_bytes")}
    cache.max_bytes = max(sizes.values()) + 1000  # holds either, not both: loading b evicts a
    assert app_client.post(f"/v1/models/{b}/predict", json=ROW).status_code == 200
    after_b = _cache_metrics(app_client)
    assert a not in cache
    assert after_b["loads_total"] == hit["loads_total"] + 1 and after_b["evictions_total"] == hit["evictions_total"] + 1
    assert after_b["load_seconds_total"] > hit["load_seconds_total"]
    assert after_b["models"] == 1 and after_b["size_bytes"] == cache.size_bytes


def test_concurrent_first_requests_load_a_cold_model_once(app_client):
    (mid,) = _models(app_client, 1)
    cache = app_client.app.state.runtime.cache
    cache.evict(mid)
    art = app_client.app.state.runtime.art
    original = art.load_bundle
    calls = []
    gate = threading.Event()

    def slow_load(model_id):
        calls.append(model_id)
        gate.wait(5)
        return original(model_id)

    art.load_bundle = slow_load
    try:
        out = []
        threads = [threading.Thread(target=lambda: out.append(cache.get(mid))) for _ in range(8)]
        for t in threads:
            t.start()
        threading.Timer(0.3, gate.set).start()
        for t in threads:
            t.join(10)
    finally:
        art.load_bundle = original
    assert len(out) == 8 and all(o is out[0] for o in out)
    assert calls == [mid]


def test_delete_under_load_answers_200_or_404_never_500(app_client):
    (mid,) = _models(app_client, 1)
    cache = app_client.app.state.runtime.cache
    statuses = []
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            cache.evict(mid)  # every request a cold load: the window between record and artifact is hit
            statuses.append(app_client.post(f"/v1/models/{mid}/predict", json=ROW).status_code)
            statuses.append(app_client.post(f"/v2/models/{mid}/infer", json={"inputs": [
                {"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}).status_code)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    while len(statuses) < 12:
        pass
    assert app_client.delete(f"/v1/models/{mid}").status_code == 204
    n = len(statuses)
    while len(statuses) < n + 12:
        pass
    stop.set()
    for t in threads:
        t.join(10)
    assert set(statuses) <= {200, 404}, sorted(set(statuses))
    assert statuses[-1] == 404 and 200 in statuses


@pytest.mark.parametrize("protocol", ["v1", "v2"])
def test_a_delete_while_a_cold_load_reads_the_artifact_is_a_404(app_client, protocol):
    """Deterministically the window the randomized test above hits by chance: the request has read the model's
    record and is loading its artifact when the model is deleted (record, then artifact). The load finds the
    artifact gone, checks the record again and answers 404, never 500."""
    (mid,) = _models(app_client, 1)
    rt = app_client.app.state.runtime
    rt.cache.evict(mid)
    url, body = ((f"/v1/models/{mid}/predict", ROW) if protocol == "v1" else (f"/v2/models/{mid}/infer", V2_ROW))

    def delete():
        assert app_client.delete(f"/v1/models/{mid}").status_code == 204
        assert not rt.art.model_exists(mid)

    r, _ = while_paused(rt.art, "load_bundle", lambda: app_client.post(url, json=body), delete)
    assert r.status_code == 404, r.text
    if protocol == "v1":
        assert r.headers["content-type"].startswith("application/problem+json")
    else:
        assert "error" in r.json()
    assert mid not in rt.cache


def test_artifact_missing_under_an_existing_record_is_still_an_integrity_error(app_client):
    (mid,) = _models(app_client, 1)
    rt = app_client.app.state.runtime
    rt.cache.evict(mid)
    rt.art.model_path(mid).unlink()
    r = app_client.post(f"/v1/models/{mid}/predict", json=ROW)
    assert r.status_code == 500 and "missing" in r.json()["detail"]


def test_every_route_that_needs_a_model_loads_a_cold_one_off_the_event_loop(app_client):
    """A cold load can take seconds on a large bundle: predict, evaluate, explain and partial dependence all load it
    in a worker thread, never on the event loop (where /health/live would wait for it)."""
    import asyncio

    (mid,) = _models(app_client, 1)
    ds = app_client.get("/v1/datasets").json()["data"][0]["id"]
    runtime = app_client.app.state.runtime
    art = runtime.art
    original = art.load_bundle
    on_loop = []

    def watched_load(model_id):
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return original(model_id)

    requests = {
        "predict": ("predict", ROW),
        "evaluate": ("evaluate", {"dataset_id": ds}),
        "explain": ("explain", {"instances": ROW["instances"]}),
        "partial dependence": ("partial-dependence", {"dataset_id": ds, "features": ["petal_length"]}),
    }
    art.load_bundle = watched_load
    try:
        for what, (path, body) in requests.items():
            runtime.cache.evict(mid)
            on_loop.clear()
            r = app_client.post(f"/v1/models/{mid}/{path}", json=body)
            assert r.status_code == 200, (what, r.text)
            assert on_loop == [False], f"{what}: the cold model was loaded on the event loop"
    finally:
        art.load_bundle = original


# -- /v2 by model name: the name resolved once, then answered as by id (services/dataplane.py, peek_named) -----------
V2_ROW = {"inputs": [{"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}


def _named(client, name="flowers"):
    ds = upload_csv(client, iris_csv()).json()["id"]
    mid, job = train(client, algorithm="gaussian_nb", dataset_id=ds, target="species", name=name)
    assert job["status"] == "succeeded", job
    return ds, mid


def _count_lookups(monkeypatch, runtime) -> dict:
    """Counts of metadata reads (the two a name resolution makes) and of hops to a worker thread."""
    from service.api import fastpath
    from service.services import dataplane

    calls = {"get_model": 0, "find_models_by_name": 0, "thread": 0}
    for method in ("get_model", "find_models_by_name"):
        def counted(*a, _m=method, _f=getattr(runtime.meta, method)):
            calls[_m] += 1
            return _f(*a)
        monkeypatch.setattr(runtime.meta, method, counted)
    for module in (fastpath, dataplane):
        def hop(fn, *a, _f=module.run_in_threadpool):
            calls["thread"] += 1
            return _f(fn, *a)
        monkeypatch.setattr(module, "run_in_threadpool", hop)
    return calls


def test_a_v2_request_by_name_for_a_cached_model_makes_no_metadata_call_and_no_thread_hop(app_client, monkeypatch):
    from service.services import dataplane

    monkeypatch.setattr(dataplane, "RECHECK_SECONDS", 3600.0)  # however slowly the requests go
    _, mid = _named(app_client)
    first = app_client.post("/v2/models/flowers/infer", json=V2_ROW)  # resolves the name, loads the model
    assert first.status_code == 200 and first.json()["model_name"] == "flowers"
    calls = _count_lookups(monkeypatch, app_client.app.state.runtime)
    for _ in range(5):
        r = app_client.post("/v2/models/flowers/infer", json=V2_ROW)
        assert r.status_code == 200 and r.content == first.content  # named as asked, byte for byte
    assert calls == {"get_model": 0, "find_models_by_name": 0, "thread": 0}
    by_id = app_client.post(f"/v2/models/{mid}/infer", json=V2_ROW)
    assert by_id.json()["outputs"] == first.json()["outputs"] and by_id.json()["model_name"] == mid
    assert calls == {"get_model": 0, "find_models_by_name": 0, "thread": 0}


def test_a_name_is_resolved_again_at_once_after_a_model_is_created_or_deleted_in_this_process(app_client,
                                                                                                monkeypatch):
    from service.services import dataplane

    monkeypatch.setattr(dataplane, "RECHECK_SECONDS", 3600.0)  # only this process's writes can tell the plane
    ds, mid = _named(app_client)
    assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200
    # a second model takes the name (the request returns while it trains): the name is ambiguous from now on
    r = app_client.post("/v1/train", json={"algorithm": "gaussian_nb", "dataset_id": ds, "target": "species",
                                           "name": "flowers"})
    assert r.status_code == 202, r.text
    other = r.json()["model_id"]
    r = app_client.post("/v2/models/flowers/infer", json=V2_ROW)
    assert r.status_code == 400, r.text
    assert r.json() == {"error": f"model name 'flowers' is ambiguous: 2 models share it "
                                 f"({', '.join(sorted([mid, other]))}); use the model id instead"}
    wait_job(app_client, app_client.get(f"/v1/models/{other}").json()["job_id"])  # deleted once trained
    assert app_client.delete(f"/v1/models/{other}").status_code == 204
    assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200  # unique again
    # its model deleted: 404 at once
    assert app_client.delete(f"/v1/models/{mid}").status_code == 204
    r = app_client.post("/v2/models/flowers/infer", json=V2_ROW)
    assert r.status_code == 404 and r.json() == {"error": "no model has the id or name 'flowers'"}


def test_a_model_row_written_in_this_process_is_seen_even_while_the_bundle_stays_cached(app_client, monkeypatch):
    """The plane's memory of names follows the metadata store's writes, not only the cache's evictions."""
    from service.services import dataplane

    monkeypatch.setattr(dataplane, "RECHECK_SECONDS", 3600.0)
    _, mid = _named(app_client)
    assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200
    runtime = app_client.app.state.runtime
    record = runtime.meta.get_model(mid)
    runtime.meta.insert_model({**record, "id": "m-second"})  # neither the cache nor the API told
    assert "ambiguous" in app_client.post("/v2/models/flowers/infer", json=V2_ROW).json()["error"]
    runtime.meta.delete_model("m-second")
    assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200
    runtime.meta.delete_model(mid)  # the row only: the bundle is still cached, its artifact still there
    assert mid in runtime.cache
    assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 404


def test_changes_made_by_another_replica_are_seen_within_the_recheck_bound(app_client):
    """Another replica shares the metadata store (and the artifacts), not this process: what it creates or deletes
    is seen once the name is resolved again, RECHECK_SECONDS after it was."""
    import time

    from service.services.inference import RECHECK_SECONDS
    from service.storage.metadata import MetadataStore

    _, mid = _named(app_client)
    runtime = app_client.app.state.runtime
    replica = MetadataStore(runtime.meta.url)  # another process's store: its writes are not counted here
    try:
        assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200
        replica.insert_model({**replica.get_model(mid), "id": "m-elsewhere"})
        time.sleep(RECHECK_SECONDS)
        assert "ambiguous" in app_client.post("/v2/models/flowers/infer", json=V2_ROW).json()["error"]
        replica.delete_model("m-elsewhere")
        assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 200
        replica.delete_model(mid)  # as the other replica's DELETE: the row, then the artifact
        runtime.art.delete_model(mid)
        time.sleep(RECHECK_SECONDS)
        assert app_client.post("/v2/models/flowers/infer", json=V2_ROW).status_code == 404
    finally:
        replica.dispose()
