"""Model selection over REST: cross-validate, compare, tune, automl, learning-curve, feature-selection.

Parity with scikit-learn on the same fold indices, the t statistics against SciPy and the corrected
resampled formula, no leakage of the table preprocessing, bad input, cancellation, restart and fan-out.
"""

import math
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats

from service.app import create_app
from service.services.selection import make_folds
from service.settings import Settings
from tests.service.conftest import assert_problem, iris_csv, upload_csv, wait_job


def _csv(X, y, names, target="y", missing=None):
    lines = [",".join([*names, target])]
    for i, (row, t) in enumerate(zip(X, y, strict=True)):
        vals = ["" if missing is not None and missing[i, j] else f"{v!r}" for j, v in enumerate(row.tolist())]
        lines.append(",".join(vals + [str(t)]))
    return "\n".join(lines) + "\n"


@pytest.fixture
def diabetes_missing():
    """Diabetes with ~15% of two columns missing (imputation is part of the preprocessing)."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(0)
    miss = np.zeros(X.shape, dtype=bool)
    miss[:, [0, 2]] = rng.random((X.shape[0], 2)) < 0.15
    Xm = X.copy()
    Xm[miss] = np.nan
    names = [f"x{j}" for j in range(X.shape[1])]
    return Xm, y, _csv(X, y, names, missing=miss), names


def _submit(client, path, body, status=202):
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()["job"]


def _run(client, path, body, timeout=120):
    job = wait_job(client, _submit(client, path, body)["id"], timeout=timeout)
    assert job["status"] == "succeeded", job
    return job


# ------------------------------------------------------------------------------------------------
# cross-validate: parity and leakage
# ------------------------------------------------------------------------------------------------
def test_cross_validate_matches_sklearn_pipeline_and_a_leaky_scaler_would_differ(client, diabetes_missing):
    from sklearn.impute import SimpleImputer
    from sklearn.metrics import r2_score
    from sklearn.model_selection import cross_validate
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, text, _ = diabetes_missing
    ds = upload_csv(client, text).json()["id"]
    job = _run(client, "/v1/cross-validate", {"algorithm": "knn_regressor", "params": {"n_neighbors": 7},
                                              "dataset_id": ds, "target": "y", "folds": 5, "random_state": 3,
                                              "metrics": ["r2", "mae"]})
    res = job["result"]
    folds = make_folds(y, "regression", 5, True, 3)
    pipe = make_pipeline(SimpleImputer(), StandardScaler(), KNeighborsRegressor(7))
    sk = cross_validate(pipe, X, y, cv=folds, scoring={"r2": "r2", "mae": "neg_mean_absolute_error"})
    assert res["folds"] == 5
    np.testing.assert_allclose(res["metrics"]["r2"]["per_fold"], sk["test_r2"], rtol=1e-9)
    np.testing.assert_allclose(res["metrics"]["mae"]["per_fold"], -sk["test_mae"], rtol=1e-9)
    assert res["metrics"]["r2"]["mean"] == pytest.approx(np.mean(sk["test_r2"]))
    assert res["metrics"]["r2"]["std"] == pytest.approx(np.std(sk["test_r2"], ddof=1))
    assert res["greater_is_better"] == {"r2": True, "mae": False}
    assert len(res["fit_time"]["per_fold"]) == 5
    # the same model with imputation and scaling fitted on ALL rows (leakage) scores differently
    Xl = StandardScaler().fit_transform(SimpleImputer().fit_transform(X))
    leaky = [r2_score(y[te], KNeighborsRegressor(7).fit(Xl[tr], y[tr]).predict(Xl[te])) for tr, te in folds]
    assert np.max(np.abs(np.asarray(leaky) - res["metrics"]["r2"]["per_fold"])) > 1e-4


def test_a_folds_kept_preprocessing_gives_the_scores_of_a_fresh_one(monkeypatch):
    """fit_score keeps a fold's preprocessing and matrices for the next candidates of that fold: the same scores as
    fitting them afresh (large folds, not kept), and an estimator that scales its input in place cannot change
    what the next candidate gets."""
    from core import registry
    from core.context import FitContext
    from service.services import selection as sel

    rng = np.random.default_rng(0)
    n = 300
    a, b = rng.normal(size=n) * 10 + 3, rng.normal(size=n)
    a[rng.random(n) < 0.1] = np.nan  # imputed with the training fold's mean
    y = np.where(np.nan_to_num(a) + b > 3, "p", "n").astype(object)
    data = sel.TaskData("ds_fold_cache", "y", "classification", [{"name": "a", "type": "numeric"},
                        {"name": "b", "type": "numeric"}], {"a": a, "b": b}, y, np.arange(n))
    folds = sel.make_folds(y, "classification", 3, True, 0)
    knn = registry.get("knn_classifier")
    sel._FOLDS.clear()

    def scores(k):
        return [sel.fit_score(data, knn, {"n_neighbors": k}, ["a", "b"], tr, te, ["accuracy"], FitContext())
                ["test"]["accuracy"] for tr, te in folds]

    kept = [scores(k) for k in (1, 5, 15)]
    assert len(sel._FOLDS) == 3  # one entry per fold, shared by the three candidates
    for entry in sel._FOLDS.values():
        entry[1][:] = 0.0  # the kept training matrices are what is used...
    assert [scores(k) for k in (1, 5, 15)] != kept
    sel._FOLDS.clear()
    monkeypatch.setattr(sel, "_FOLD_MAX_BYTES", 0)  # ...and with none kept, the scores of a fresh fit
    assert [scores(k) for k in (1, 5, 15)] == kept and not sel._FOLDS
    monkeypatch.setattr(sel, "_FOLD_MAX_BYTES", 64 << 20)

    class InPlace(knn):  # an estimator that scales the matrix it is handed
        def fit(self, X, y, **kw):
            X *= 2.0
            return super().fit(X, y, **kw)

    sel.fit_score(data, InPlace, {"n_neighbors": 1}, ["a", "b"], *folds[0], ["accuracy"], FitContext())
    assert scores(1)[0] == kept[0][0]  # the next candidate of that fold got the matrix unscaled


def test_results_persist_across_a_restart_and_stream_over_sse(settings):
    with TestClient(create_app(settings)) as c:
        ds = upload_csv(c, iris_csv()).json()["id"]
        job = _run(c, "/v1/cross-validate", {"algorithm": "gaussian_nb", "dataset_id": ds, "target": "species",
                                             "folds": 3, "random_state": 0})
        with c.stream("GET", f"/v1/jobs/{job['id']}/events") as r:
            body = "".join(r.iter_text())
        assert "event: end" in body and '"succeeded"' in body
        trials = c.get("/v1/jobs", params={"kind": "trial"}).json()
        assert trials["count"] == 3  # one trial job per fold...
        assert all(j["kind"] != "trial" for j in c.get("/v1/jobs").json()["data"])  # ...hidden by default
    with TestClient(create_app(settings)) as c:
        again = c.get(f"/v1/jobs/{job['id']}").json()
        assert again["status"] == "succeeded" and again["result"] == job["result"]


def test_progress_per_trial_streams_over_sse(client):
    """The parent's progress moves trial by trial ("trials=k/n" in its message) and the SSE stream carries it."""
    import json

    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    ds = upload_csv(client, _csv(X, y, [f"f{j}" for j in range(X.shape[1])])).json()["id"]
    job = _submit(client, "/v1/tune", {"algorithm": "random_forest_classifier",
                                       "params": {"n_estimators": 60, "random_state": 0},
                                       "space": {"max_depth": [3, 5, 8, None]}, "dataset_id": ds, "target": "y",
                                       "folds": 3, "random_state": 0, "refit": False})
    seen = []
    with client.stream("GET", f"/v1/jobs/{job['id']}/events", params={"interval": 0.05}) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
    running = [e for e in seen if e.get("status") == "running" and "trials=" in (e.get("message") or "")]
    assert len({e["progress"] for e in running}) >= 2, seen  # several steps, not one jump to the end
    done = [int(e["message"].split("trials=")[1].split("/")[0]) for e in running]
    assert done == sorted(done) and all(0 <= e["progress"] <= 1 for e in running)
    assert any(0 < e["progress"] < 1 for e in running)
    assert seen[-1]["status"] == "succeeded" and seen[-1]["progress"] == 1.0


# ------------------------------------------------------------------------------------------------
# compare: paired t-test = scipy.stats.ttest_rel, corrected resampled t-test decides
# ------------------------------------------------------------------------------------------------
def test_compare_t_tests_match_scipy_and_the_corrected_formula(client):
    ds = upload_csv(client, iris_csv()).json()["id"]
    cands = [{"algorithm": "knn_classifier", "params": {"n_neighbors": 1}}, {"algorithm": "gaussian_nb"},
             {"algorithm": "decision_tree_classifier", "params": {"max_depth": 1}}]
    res = _run(client, "/v1/compare", {"candidates": cands, "dataset_id": ds, "target": "species", "folds": 5,
                                       "repeats": 2, "random_state": 1, "metric": "accuracy"})["result"]
    assert res["metric"] == "accuracy" and len(res["scores"]) == 3
    assert all(len(s) == 10 for s in res["scores"])
    assert [p["a"] for p in res["pairs"]] == [0, 0, 1] and [p["b"] for p in res["pairs"]] == [1, 2, 2]
    for pair in res["pairs"]:
        a, b = np.asarray(res["scores"][pair["a"]]), np.asarray(res["scores"][pair["b"]])
        ref = stats.ttest_rel(a, b)
        assert pair["t_statistic"] == pytest.approx(ref.statistic, rel=1e-9)
        assert pair["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
        assert pair["df"] == 9
        d = a - b
        # Nadeau & Bengio (2003): variance (1/J + n_test/n_train) s^2, J = 10 resamples; n_test/n_train = 1/4
        t = d.mean() / math.sqrt((1 / 10 + 30 / 120) * d.var(ddof=1))
        p = 2 * stats.t.sf(abs(t), 9)
        assert pair["p_value_corrected"] == pytest.approx(p, rel=1e-9)
        assert pair["p_value_corrected"] >= pair["p_value"]
        expected = ("no_significant_difference" if p >= 0.05 else ("a_better" if d.mean() > 0 else "b_better"))
        assert pair["verdict"] == expected
    # a depth-1 tree (two of three classes at best) is clearly worse than 1-NN
    assert res["pairs"][1]["verdict"] == "a_better"
    # the repeats used the same folds for every candidate: the two seeds' folds
    assert res["means"][0] == pytest.approx(np.mean(res["scores"][0]))


# ------------------------------------------------------------------------------------------------
# tune
# ------------------------------------------------------------------------------------------------
def test_grid_tune_matches_gridsearchcv_and_refits_an_ordinary_model(client, diabetes_missing):
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, text, _ = diabetes_missing
    ds = upload_csv(client, text).json()["id"]
    alphas = [0.01, 1.0, 10.0, 100.0]
    job = _run(client, "/v1/tune", {"algorithm": "ridge_regression", "search": "grid", "space": {"alpha": alphas},
                                    "dataset_id": ds, "target": "y", "folds": 4, "random_state": 5,
                                    "metric": "r2", "name": "tuned-ridge"})
    res = job["result"]
    folds = make_folds(y, "regression", 4, True, 5)
    gs = GridSearchCV(make_pipeline(SimpleImputer(), StandardScaler(), Ridge()), {"ridge__alpha": alphas},
                      cv=folds, scoring="r2").fit(X, y)
    by_alpha = {t["params"]["alpha"]: t for t in res["trials"]}
    for i, a in enumerate(alphas):
        assert by_alpha[a]["mean"] == pytest.approx(gs.cv_results_["mean_test_score"][i], rel=1e-7)
        assert by_alpha[a]["rank"] == gs.cv_results_["rank_test_score"][i]
    assert res["best_params"]["alpha"] == gs.best_params_["ridge__alpha"]
    assert res["best_score"] == pytest.approx(gs.best_score_, rel=1e-7)
    assert [t["rank"] for t in res["trials"]] == [1, 2, 3, 4]
    model = client.get(f"/v1/models/{res['model_id']}").json()
    assert job["model_id"] == res["model_id"]
    assert model["status"] == "ready" and model["name"] == "tuned-ridge"
    assert model["params"]["alpha"] == res["best_params"]["alpha"]
    assert model["job_id"] == job["id"] and model["metrics"]["selection"]["job_id"] == job["id"]
    pred = client.post(f"/v1/models/{res['model_id']}/predict", json={"rows": [[None] * 10]})
    assert pred.status_code == 200, pred.text


def test_halving_follows_the_schedule_of_halvinggridsearchcv(client):
    from sklearn.datasets import load_breast_cancer
    from sklearn.experimental import enable_halving_search_cv  # noqa: F401
    from sklearn.model_selection import HalvingGridSearchCV
    from sklearn.neighbors import KNeighborsClassifier

    X, y = load_breast_cancer(return_X_y=True)
    names = [f"f{j}" for j in range(X.shape[1])]
    ds = upload_csv(client, _csv(X, y, names)).json()["id"]
    grid = [1, 3, 5, 7, 9, 11, 15, 21, 31]
    res = _run(client, "/v1/tune", {"algorithm": "knn_classifier", "search": "halving",
                                    "space": {"n_neighbors": grid}, "dataset_id": ds, "target": "y", "folds": 3,
                                    "random_state": 0, "refit": False})["result"]
    sk = HalvingGridSearchCV(KNeighborsClassifier(), {"n_neighbors": grid}, cv=3, factor=3).fit(X, y)
    assert [it["n_candidates"] for it in res["iterations"]] == list(sk.n_candidates_)
    assert [it["n_resources"] for it in res["iterations"]] == list(sk.n_resources_)
    assert res["model_id"] is None
    last = res["iterations"][-1]["iteration"]
    assert res["trials"][0]["iteration"] == last and res["best_params"] == res["trials"][0]["params"]


def test_random_search_draws_validated_points_from_ranges(client):
    ds = upload_csv(client, iris_csv()).json()["id"]
    res = _run(client, "/v1/tune", {"algorithm": "logistic_regression", "search": "random", "n_iter": 4,
                                    "space": {"C": {"low": 0.01, "high": 100, "log": True}},
                                    "dataset_id": ds, "target": "species", "folds": 3, "random_state": 2})["result"]
    Cs = [t["params"]["C"] for t in res["trials"]]
    assert len(Cs) == 4 and all(0.01 <= c <= 100 for c in Cs) and len(set(Cs)) == 4


# ------------------------------------------------------------------------------------------------
# learning curve, feature selection, automl
# ------------------------------------------------------------------------------------------------
def test_learning_curve(client):
    ds = upload_csv(client, iris_csv()).json()["id"]
    res = _run(client, "/v1/learning-curve", {"algorithm": "gaussian_nb", "dataset_id": ds, "target": "species",
                                              "train_sizes": [0.2, 0.5, 1.0], "folds": 5,
                                              "random_state": 0})["result"]
    assert res["train_sizes"] == [24, 60, 120]
    assert len(res["train"]["mean"]) == len(res["test"]["std"]) == 3
    assert all(len(p) == 5 for p in res["test"]["per_fold"])
    assert res["test"]["mean"][-1] > 0.9


def test_forward_feature_selection_finds_the_informative_columns(client):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = 3 * X[:, 1] - 2 * X[:, 3] + 0.1 * rng.normal(size=120)
    ds = upload_csv(client, _csv(X, y, [f"x{j}" for j in range(5)])).json()["id"]
    res = _run(client, "/v1/feature-selection", {"algorithm": "linear_regression", "dataset_id": ds,
                                                 "target": "y", "direction": "forward", "folds": 4,
                                                 "random_state": 0, "tol": 0.001})["result"]
    assert sorted(res["selected"]) == ["x1", "x3"]
    assert [len(s["features"]) for s in res["steps"]] == [1, 2]
    assert res["steps"][-1]["score"] > 0.99
    back = _run(client, "/v1/feature-selection", {"algorithm": "linear_regression", "dataset_id": ds,
                                                  "target": "y", "direction": "backward", "n_features": 2,
                                                  "folds": 4, "random_state": 0})["result"]
    assert sorted(back["selected"]) == ["x1", "x3"]


def test_automl_leaderboard_skips_what_the_data_rules_out(client):
    from sklearn.datasets import load_iris

    d = load_iris()
    X = d.data - d.data.mean(axis=0)  # negative values: no multinomial NB
    ds = upload_csv(client, _csv(X, d.target_names[d.target], ["a", "b", "c", "d"], target="species")).json()["id"]
    job = _run(client, "/v1/automl", {"dataset_id": ds, "target": "species", "folds": 3, "random_state": 0,
                                      "time_budget_s": 120,
                                      "algorithms": ["gaussian_nb", "multinomial_nb", "knn_classifier",
                                                     "decision_tree_classifier", "logistic_regression"]})
    res = job["result"]
    assert [s["algorithm"] for s in res["skipped"]] == ["multinomial_nb"]
    board = res["leaderboard"]
    assert {r["algorithm"] for r in board} == {"gaussian_nb", "knn_classifier", "decision_tree_classifier",
                                              "logistic_regression"}
    means = [r["mean"] for r in board]
    assert means == sorted(means, reverse=True) and [r["rank"] for r in board] == [1, 2, 3, 4]
    assert board[0]["p_value_vs_best"] is None
    assert all(0 <= r["p_value_vs_best"] <= 1 and r["std"] >= 0 for r in board[1:])
    model = client.get(f"/v1/models/{res['best_model_id']}").json()
    assert model["status"] == "ready" and model["algorithm"] == board[0]["algorithm"]
    assert model["params"] == board[0]["params"] and model["job_id"] == job["id"]


def test_automl_stops_trials_at_the_time_budget(client):
    """A budget far below what the plan needs: trials not finished by the deadline are cancelled and listed."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    ds = upload_csv(client, _csv(X, y, [f"f{j}" for j in range(X.shape[1])])).json()["id"]
    job = wait_job(client, _submit(client, "/v1/automl", {"dataset_id": ds, "target": "y", "task": "classification",
                                                          "folds": 5, "time_budget_s": 1.0,
                                                          "random_state": 0})["id"], timeout=120)
    if job["status"] == "failed":  # not even the first trial finished in time on a loaded machine
        assert "time budget" in job["error"]["message"]
        return
    res = job["result"]
    assert res["not_evaluated"], res
    assert res["n_trials"] < len(res["leaderboard"]) + len(res["not_evaluated"]) + len(res["failed"]) + 10


def test_automl_skips_kernel_methods_past_their_row_budget(client):
    from service.services.selection import AUTOML_GRIDS, ROW_BUDGET, automl_plan

    rng = np.random.default_rng(0)
    n = ROW_BUDGET["svm_classifier"] + 1
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, "a", "b")
    ds = upload_csv(client, _csv(X, y, ["u", "v"])).json()["id"]
    job = _run(client, "/v1/automl", {"dataset_id": ds, "target": "y", "folds": 2, "random_state": 0,
                                      "time_budget_s": 120, "algorithms": ["gaussian_nb", "svm_classifier"]})
    res = job["result"]
    assert [s["algorithm"] for s in res["skipped"]] == ["svm_classifier"]
    assert "row" in res["skipped"][0]["reason"] and str(n) in res["skipped"][0]["reason"]
    assert [r["algorithm"] for r in res["leaderboard"]] == ["gaussian_nb"]
    assert res["n_trials"] == 1  # gaussian_nb only: no svm candidate was queued
    # the budget's edge, on the plan itself: at the budget it is tried, one row more it is skipped
    cols = [{"name": "u", "type": "numeric", "summary": {"min": -1.0}}]
    for name, budget in ROW_BUDGET.items():
        task = "regression" if "regress" in name else "classification"
        at, _ = automl_plan(task, [name], budget, cols)
        past, skipped = automl_plan(task, [name], budget + 1, cols)
        assert at and not past and skipped[0]["algorithm"] == name, name
    # on a large table exactly the plan's kernel methods are skipped
    nonneg = [{"name": "u", "type": "numeric", "summary": {"min": 0.0}}]
    for task in ("classification", "regression"):
        big, skipped = automl_plan(task, None, 10**7, nonneg)
        names = {s["algorithm"] for s in skipped}
        assert names == {a for a, _ in AUTOML_GRIDS[task] if a in ROW_BUDGET} and names
        assert not names & {c["algorithm"] for c in big}


def test_automl_skips_multinomial_nb_on_negative_values_only(client):
    from service.services.selection import automl_plan

    pos = [{"name": "u", "type": "numeric", "summary": {"min": 0.0}},
           {"name": "c", "type": "categorical", "summary": {}}]
    neg = [*pos, {"name": "w", "type": "numeric", "summary": {"min": -0.5}}]
    cands, skipped = automl_plan("classification", ["multinomial_nb", "gaussian_nb"], 100, pos)
    assert {c["algorithm"] for c in cands} == {"multinomial_nb", "gaussian_nb"} and not skipped
    cands, skipped = automl_plan("classification", ["multinomial_nb", "gaussian_nb"], 100, neg)
    assert {c["algorithm"] for c in cands} == {"gaussian_nb"}
    assert skipped == [{"algorithm": "multinomial_nb", "reason": skipped[0]["reason"]}] and "w" in skipped[0]["reason"]
    # through the API, counts (non-negative) keep it in the leaderboard
    from sklearn.datasets import load_iris

    d = load_iris()
    ds = upload_csv(client, _csv(d.data, d.target_names[d.target], ["a", "b", "c", "d"], target="s")).json()["id"]
    res = _run(client, "/v1/automl", {"dataset_id": ds, "target": "s", "folds": 3, "random_state": 0,
                                      "time_budget_s": 120, "algorithms": ["multinomial_nb"]})["result"]
    assert res["skipped"] == [] and [r["algorithm"] for r in res["leaderboard"]] == ["multinomial_nb"]


@pytest.mark.slow
def test_automl_time_budget_is_respected_within_ten_percent(tmp_path):
    """Many candidates, a budget they cannot all use: the job (claimed -> finished, the refit included) ends
    within 1.1 x time_budget_s, and the trials did use the budget (generous lower bound)."""
    from sklearn.datasets import make_classification

    budget = 10.0  # ten folds of every candidate: more trials than any machine fits in 85% of it
    X, y = make_classification(3000, 20, n_informative=8, random_state=0)
    settings = Settings(data_dir=tmp_path / "d", workers=2, secret_key="s", job_poll_interval=0.05)
    with TestClient(create_app(settings)) as c:
        q = c.app.state.runtime.queue
        deadline = time.monotonic() + 120
        while not all(slot.ready for slot in q._slots):
            assert time.monotonic() < deadline, "the pool did not start"
            time.sleep(0.05)
        ds = upload_csv(c, _csv(X, np.where(y == 1, "p", "n"), [f"x{j}" for j in range(20)])).json()["id"]
        job = _run(c, "/v1/automl", {"dataset_id": ds, "target": "y", "folds": 10, "random_state": 0,
                                     "time_budget_s": budget}, timeout=300)
        meta = c.app.state.runtime.meta
        rec = meta.get_job(job["id"])

        def since(t):
            return None if t is None else round((t.replace(tzinfo=None) - t0).total_seconds(), 2)

        t0 = rec["started_at"].replace(tzinfo=None)
        # the trials' timeline (seconds since the job started), shown if the bound fails
        timeline = sorted(((since(r.started_at) or -1.0), since(r.finished_at), r.status, r.payload["algorithm"],
                           r.worker) for r in _children(meta, job["id"]))
    res = job["result"]
    elapsed = (rec["finished_at"] - rec["started_at"]).total_seconds()
    assert elapsed <= 1.1 * budget, (elapsed, res, timeline)
    assert res["elapsed_s"] <= 1.1 * budget
    assert res["not_evaluated"], res  # many candidates: not all of them fitted in the budget...
    assert res["search_s"] >= 0.5 * budget  # ...and the trials used it
    assert res["refitted"]["within_budget"] and res["best_model_id"], (res, timeline)
    assert len(res["leaderboard"]) >= 2


# ------------------------------------------------------------------------------------------------
# bad input: 422 before anything is queued
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,body,loc", [
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbours": [1, 3]}}, "n_neighbours"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbors": [1, -3]}}, "n_neighbors"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbors": {"low": 0, "high": 5, "type": "int"}},
                  "search": "random"}, "n_neighbors"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {}}, "space"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbors": []}}, "n_neighbors"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbors": [1, 3]}, "n_iter": 3}, "n_iter"),
    ("/v1/tune", {"algorithm": "knn_classifier", "space": {"n_neighbors": [1, 3]}, "metric": "r2"}, "metric"),
    ("/v1/cross-validate", {"algorithm": "knn_classifier", "folds": 51}, "folds"),
    ("/v1/cross-validate", {"algorithm": "knn_classifier", "metrics": ["rmse"]}, "metrics"),
    ("/v1/cross-validate", {"algorithm": "knn_classifier", "metrics": ["nope"]}, "metrics"),
    ("/v1/cross-validate", {"algorithm": "kmeans"}, "algorithm"),
    ("/v1/cross-validate", {"algorithm": "knn_classifier", "params": {"n_neighbors": 0}}, "n_neighbors"),
    ("/v1/compare", {"candidates": [{"algorithm": "knn_classifier"}]}, "candidates"),
    ("/v1/compare", {"candidates": [{"algorithm": "knn_classifier"}, {"algorithm": "ridge_regression"}]},
     "candidates"),
    ("/v1/compare", {"candidates": [{"algorithm": "knn_classifier"}, {"algorithm": "nope"}]}, "algorithm"),
    ("/v1/learning-curve", {"algorithm": "gaussian_nb", "train_sizes": [0.5, 1.5]}, "train_sizes"),
    ("/v1/feature-selection", {"algorithm": "gaussian_nb", "n_features": 9}, "n_features"),
    ("/v1/automl", {"algorithms": ["kmeans"]}, "algorithms"),
])
def test_bad_requests_are_422_and_store_nothing(client, path, body, loc):
    ds = upload_csv(client, iris_csv()).json()["id"]
    before = client.get("/v1/jobs").json()["count"]
    r = client.post(path, json={"dataset_id": ds, "target": "species", **body})
    problem = assert_problem(r, 422)
    assert any(loc in [str(x) for x in e["loc"]] for e in problem["errors"]), problem
    assert client.get("/v1/jobs").json()["count"] == before
    assert client.get("/v1/jobs", params={"kind": "trial"}).json()["count"] == 0


# ------------------------------------------------------------------------------------------------
# cancellation, restart, fan-out
# ------------------------------------------------------------------------------------------------
SLOW = {"solver": "gd", "max_iter": 1_000_000, "tol": 1e-300, "C": 1e10}


def _wait_status(client, job_id, status, timeout=60):
    deadline = time.monotonic() + timeout
    while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] != status:
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


def _children(meta, parent_id):
    from sqlalchemy import select

    from service.storage.metadata import jobs

    with meta.engine.connect() as conn:
        rows = conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.payload, jobs.c.worker, jobs.c.started_at,
                                   jobs.c.finished_at)
                            .where(jobs.c.kind == "trial")).all()
    return [r for r in rows if r.payload["parent_id"] == parent_id]


@pytest.fixture(params=[0.2, 30.0], ids=["both-check-often", "trial-notices-first"])
def cancel_client(request, tmp_path):
    """The parent's own cancellation check every 0.2 s (as the trials') or every 30 s: then a trial always sees
    the parent's cancel first, and the parent finds a cancelled trial before its own check says why."""
    settings = Settings(data_dir=tmp_path / "data", workers=0, secret_key="test-secret",
                        job_poll_interval=request.param)
    with TestClient(create_app(settings)) as c:
        yield c


def test_cancel_stops_the_tune_and_every_trial(cancel_client):
    client = cancel_client
    ds = upload_csv(client, iris_csv()).json()["id"]
    job = _submit(client, "/v1/tune", {"algorithm": "logistic_regression", "params": SLOW,
                                       "space": {"penalty": ["l2", "none"], "fit_intercept": [True, False]},
                                       "dataset_id": ds, "target": "species", "folds": 3})
    _wait_status(client, job["id"], "running")
    meta = client.app.state.runtime.meta
    deadline = time.monotonic() + 60
    while not any(c.status == "running" for c in _children(meta, job["id"])):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    assert wait_job(client, job["id"])["status"] == "cancelled"
    deadline = time.monotonic() + 60
    while any(c.status not in ("cancelled",) for c in _children(meta, job["id"])):
        assert time.monotonic() < deadline, _children(meta, job["id"])
        time.sleep(0.05)
    assert meta.get_model(job["model_id"]) is None  # no refit, no model


@pytest.mark.slow
def test_restart_during_a_tune_fails_it_never_leaves_it_running(tmp_path):
    # one attempt and a short lease: a job left running by the stopped server is failed once its lease runs out
    settings = Settings(data_dir=tmp_path / "d", workers=1, secret_key="s", job_poll_interval=0.05,
                        job_lease_timeout=1.0, job_max_attempts=1, job_sweep_interval=0.5)
    with TestClient(create_app(settings)) as c:
        ds = upload_csv(c, iris_csv()).json()["id"]
        job = _submit(c, "/v1/tune", {"algorithm": "logistic_regression", "params": SLOW,
                                      "space": {"penalty": ["l2", "none"]}, "dataset_id": ds, "target": "species",
                                      "folds": 3})
        _wait_status(c, job["id"], "running")
    with TestClient(create_app(settings)) as c:  # a new server on the same data dir
        done = wait_job(c, job["id"], timeout=30)
        assert done["status"] == "failed" and done["error"]["type"] == "WorkerLost", done
        meta = c.app.state.runtime.meta
        deadline = time.monotonic() + 60
        while any(ch.status in ("queued", "running") for ch in _children(meta, job["id"])):
            assert time.monotonic() < deadline, _children(meta, job["id"])
            time.sleep(0.05)


@pytest.mark.slow
def test_trials_fan_out_over_two_worker_processes(tmp_path):
    import os

    settings = Settings(data_dir=tmp_path / "d", workers=2, secret_key="s", job_poll_interval=0.05)
    with TestClient(create_app(settings)) as c:
        q = c.app.state.runtime.queue
        deadline = time.monotonic() + 120
        while not all(slot.ready for slot in q._slots):
            assert time.monotonic() < deadline, "the pool did not start"
            time.sleep(0.05)
        ds = upload_csv(c, iris_csv()).json()["id"]
        job = _run(c, "/v1/tune", {"algorithm": "random_forest_classifier",
                                   "params": {"n_estimators": 40, "random_state": 0},
                                   "space": {"max_depth": [2, 3, 4, 5, 6, 8]}, "dataset_id": ds,
                                   "target": "species", "folds": 3, "random_state": 0})
        runs = sorted((r for t in job["result"]["trials"] for r in t["runs"]), key=lambda r: r["started"])
        assert len(runs) == 6 * 3  # one trial job per (candidate, fold)
        workers = {r["worker"] for r in runs}
        assert len(workers) == 2, runs  # two pool processes ran trials of this one tune...
        assert any(b["started"] < a["finished"] and a["worker"] != b["worker"]  # ...at the same time
                   for i, a in enumerate(runs) for b in runs[i + 1:]), runs
        assert all(int(w.rsplit(":", 1)[1]) != os.getpid() for w in workers)
        parent_worker = c.app.state.runtime.meta.get_job(job["id"])["worker"]
        assert parent_worker in workers  # the parent ran trials itself while it waited


@pytest.mark.parametrize("deadline", [None, "near"])
def test_a_trial_that_saw_the_parents_cancel_first_ends_the_parent_cancelled(client, monkeypatch, deadline):
    """The race of a cancel, replayed step by step: the trial reads its parent's row and stops before the
    parent's own (throttled) check has seen the request. The parent must end cancelled: not failed by a
    'cancelled trial', nor, near an AutoML deadline, with the trial taken for a time-budget stop."""
    from sqlalchemy import update

    from core.context import FitCancelled, FitContext
    from service.queue import fanout
    from service.services.selection_jobs import Fanout
    from service.storage.metadata import jobs

    runtime = client.app.state.runtime
    looks = []

    def parent_cancel_requested():  # the parent's first look: not yet; any later look: requested
        looks.append(None)
        return len(looks) > 1

    def trial_sees_the_cancel_first(job_id):  # instead of a worker: the trial stops at once
        with runtime.meta.engine.begin() as conn:
            conn.execute(update(jobs).where(jobs.c.id == job_id).values(status="cancelled"))

    monkeypatch.setattr(fanout, "enqueue", trial_sees_the_cancel_first)
    payload = {"dataset_id": "ds_x", "target": "y", "features": None, "task": "classification", "folds": 3,
               "stratify": True, "seed": 0}
    ctx = FitContext(is_cancelled=parent_cancel_requested, cancel_interval=3600.0)  # checks far apart
    run = Fanout(runtime.meta, runtime.art, {"id": "job_parent", "payload": payload}, ctx, poll=0.01)
    with pytest.raises(FitCancelled):
        run.run([{"algorithm": "gaussian_nb"}], deadline=None if deadline is None else time.time() + 0.1)
    assert len(looks) == 2  # the loop's first look said no; the cancelled trial made the parent look again
