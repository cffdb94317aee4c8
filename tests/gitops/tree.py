"""The rendered GitOps tree of an example site, in the Git repository Argo CD reads, and what to wait for."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from ansible_collections.inference.blueprints.plugins.module_utils import cli
from ansible_collections.inference.blueprints.plugins.plugin_utils import gitops

from tests.serving_helpers import INVENTORIES, LOCAL_SCHEMA_GAPS, NOT_SERVED_LOCALLY

# kinds the local plane cannot hold (no CRD, or an older CRD than the target version's fields): left out of the
# repository Argo CD reads (tests/serving_helpers.py says why for each)
NOT_SERVED = set(NOT_SERVED_LOCALLY) | set(LOCAL_SCHEMA_GAPS)


def _group_kind(obj: dict) -> tuple[str, str]:
    return (obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "", obj["kind"])


def render(site: str, work: Path, repo_url: str) -> dict[str, dict]:
    """Write the site's tree (the product's writer) into ``work``; drop the kinds the plane cannot hold from the
    component directories. Returns the intents."""
    intents = cli.site_intents(str(INVENTORIES / site), None, {"delivery": "gitops", "render_dir": str(work),
                               "gitops": {"repo_url": repo_url, "revision": "main"}})  # fmt: skip
    gitops.write(str(work), gitops.site_tree(intents))
    for kust in sorted((work / "clusters").glob("*/*/kustomization.yaml")):
        doc = yaml.safe_load(kust.read_text())
        keep = []
        for name in doc["resources"]:
            obj = yaml.safe_load((kust.parent / name).read_text())
            if _group_kind(obj) in NOT_SERVED:
                (kust.parent / name).unlink()
            else:
                keep.append(name)
        kust.write_text(yaml.safe_dump({**doc, "resources": keep}, sort_keys=False))
    return intents


def bootstrap(plane, work: Path, host: str) -> dict:
    """``oc apply --server-side -k argocd/<cluster>`` as the docs give it, without the ArgoCD CR (its operator is
    not here: tests/gitops/harness.py gives its settings to Argo CD). Returns that CR."""
    res = plane.kubectl("kustomize", str(work / "argocd" / host))
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    (health,) = [d for d in docs if d["kind"] == "ArgoCD"]
    return {"health": health, "boot": [d for d in docs if d["kind"] != "ArgoCD"]}


def apply(plane, objs: list[dict]) -> None:
    res = plane.kubectl("apply", "--server-side", "--field-manager=kubectl", "-f", "-", input=yaml.safe_dump_all(objs))
    assert res.returncode == 0, res.stderr


def summary(apps: list[dict]) -> list[tuple]:
    out = []
    for a in apps:
        st = a.get("status") or {}
        op = st.get("operationState") or {}
        out.append((a["metadata"]["annotations"].get(gitops.WAVE), a["metadata"]["name"],
                    (st.get("sync") or {}).get("status"), (st.get("health") or {}).get("status"),
                    op.get("phase"), (op.get("message") or "")[:160]))  # fmt: skip
    return sorted(out, key=lambda t: (int(t[0] or 0), t[1]))


def live(plane, app: dict) -> list[dict]:
    """The objects an Application deployed, as Argo CD lists them in its status, read from the plane."""
    out = []
    for r in (app.get("status") or {}).get("resources") or []:
        kind = f"{r['kind']}.{r['group']}" if r.get("group") else r["kind"]
        args = ["get", kind, r["name"], "-o", "json"] + (["-n", r["namespace"]] if r.get("namespace") else [])
        res = plane.kubectl(*args)
        assert res.returncode == 0, res.stderr
        out.append(json.loads(res.stdout))
    return out


def wait_healthy(argo, names: set[str], timeout: float) -> list[dict]:
    """Every Application of ``names`` Synced and Healthy (the root's waves all applied)."""
    end = time.monotonic() + timeout
    apps: list[dict] = []
    while time.monotonic() < end:
        apps = argo.applications()
        done = {
            a["metadata"]["name"]
            for a in apps
            if ((a.get("status") or {}).get("sync") or {}).get("status") == "Synced"
            and ((a.get("status") or {}).get("health") or {}).get("status") == "Healthy"
        }
        if names <= done:
            return apps
        time.sleep(2)
    raise AssertionError(
        f"not Synced+Healthy in {timeout} s:\n{json.dumps(summary(apps), indent=1)}\n--- controller:\n{argo.tail()}"
    )


class Synced:
    """One cluster of a site synced by its own Argo CD on its own plane (stop() ends that Argo CD)."""

    def __init__(self, plane, git, intents: dict, host: str, workdir: Path):
        from .harness import ArgoCD

        self.plane, self.git, self.intents, self.host = plane, git, intents, host
        plane.set_real_controller("Application")  # Argo CD's own controller writes Application status here
        boot = bootstrap(plane, git.work, host)
        self.gitops = intents[host]["gitops"]
        workdir.mkdir()
        self.argo = ArgoCD(plane, self.gitops["argocd_namespace"], boot["health"], workdir).start()
        self.t0 = time.monotonic()
        apply(plane, boot["boot"])
        self.names = {self.gitops["root"]["name"]} | {
            a["name"] for a in self.gitops["apps"] if (git.work / a["path"]).is_dir()
        }
        self.apps: list[dict] = []
        self.seconds = 0.0

    def wait(self, timeout: float) -> Synced:
        self.apps = wait_healthy(self.argo, self.names, timeout)
        self.seconds = time.monotonic() - self.t0
        return self

    def stop(self) -> None:
        self.argo.stop()
