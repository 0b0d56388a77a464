"""The baseline for bench/service.py: a bare ASGI app that only decodes the JSON and runs NumPy.

It computes the same single-row logistic-regression prediction as Orchard (standardise, dot, softmax)
with no framework, no validation and no model lookup: the ceiling Orchard is compared against. It reads
``{"rows": [[...]]}`` (the /v1 body) or an Open Inference Protocol body with one [n, k] tensor (the /v2 body).
"""

import os

import numpy as np
import orjson

_rng = np.random.default_rng(0)
N_FEATURES = int(os.environ.get("BARE_N_FEATURES", "30"))
MEAN = _rng.normal(size=N_FEATURES)
SCALE = _rng.uniform(1, 2, size=N_FEATURES)
COEF = _rng.normal(size=(2, N_FEATURES))
CLASSES = ["malignant", "benign"]


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    body = b""
    more = True
    while more:
        msg = await receive()
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    req = orjson.loads(body)
    if "inputs" in req:  # an Open Inference Protocol request: one [n, k] FP64 tensor
        t = req["inputs"][0]
        rows = np.asarray(t["data"], dtype=np.float64).reshape(t["shape"])
    else:
        rows = np.asarray(req["rows"], dtype=np.float64)
    z = ((rows - MEAN) / SCALE) @ COEF.T
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    out = orjson.dumps({"predictions": [CLASSES[i] for i in p.argmax(axis=1)]})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})
