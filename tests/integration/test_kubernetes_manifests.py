"""deploy/kubernetes/orchard.yaml: valid against the Kubernetes API schema (strict: no unknown fields), and
consistent with Orchard itself (settings that exist, commands the CLI has, probe paths the app serves,
selectors that match their pods)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes" / "orchard.yaml"
K8S_VERSION = "1.30.0"


@pytest.fixture(scope="module")
def docs():
    yaml = pytest.importorskip("yaml")
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def _by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def test_every_document_is_valid_against_the_kubernetes_schema(docs):
    import kubernetes_validate as kv

    assert {d["kind"] for d in docs} >= {"ConfigMap", "Deployment", "Service"}
    for d in docs:
        kv.validate(d, K8S_VERSION, strict=True)  # raises ValidationError naming the bad field


def test_a_broken_manifest_is_refused(docs):
    import kubernetes_validate as kv

    dep = _by_kind(docs, "Deployment")[0]
    bad = {**dep, "spec": {**dep["spec"], "replicas": "two"}}
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, K8S_VERSION, strict=True)


def test_settings_commands_probes_and_selectors_match_orchard(docs):
    import json

    from service.settings import Settings

    known = {f"ORCHARD_{name.upper()}" for name in Settings.model_fields}
    config = _by_kind(docs, "ConfigMap")[0]["data"]
    documented_secret = set(re.findall(r"--from-literal=(ORCHARD_\w+)=", MANIFEST.read_text()))
    for key in [*config, *documented_secret]:
        if key.startswith("ORCHARD_"):
            assert key in known, f"{key} is not an Orchard setting"
    assert config["ORCHARD_ARTIFACTS_URL"].startswith("s3://")  # replicas share no filesystem
    routes = set(json.loads((ROOT / "openapi" / "openapi.json").read_text())["paths"])
    roles = {}
    for dep in _by_kind(docs, "Deployment"):
        pod = dep["spec"]["template"]
        assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        (c,) = pod["spec"]["containers"]
        roles[c["args"][0]] = c
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            if probe in c:
                assert c[probe]["httpGet"]["path"] in routes
        refs = {e.get("configMapRef", {}).get("name") or e.get("secretRef", {}).get("name") for e in c["envFrom"]}
        assert refs == {"orchard-config", "orchard-secrets"}
        assert "memory" in c["resources"]["requests"] and "memory" in c["resources"]["limits"]
    assert set(roles) == {"serve", "worker"}
    assert roles["serve"]["ports"][0]["containerPort"] == 8000
    assert roles["serve"]["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert roles["serve"]["livenessProbe"]["httpGet"]["path"] == "/health/live"
    pods = [d["spec"]["template"]["metadata"]["labels"] for d in _by_kind(docs, "Deployment")]
    for svc in _by_kind(docs, "Service"):
        if svc["spec"].get("type") != "ExternalName":
            assert any(svc["spec"]["selector"].items() <= labels.items() for labels in pods)
