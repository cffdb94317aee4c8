"""The bad-input classes issue 23 found escaping (a traceback, a message without the key, or silent acceptance),
each through the ``blueprints`` command and the pure checks behind it: exit 2, the key or file named, no traceback,
nothing written. The playbook side of each class is a row of docs/reliability.md's catalogue."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import cli, cluster_facts, inventory_files
from ansible_collections.inference.blueprints.plugins.module_utils.intent import schema

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "inventories" / "example-chat"
EXPLICIT = ["plan", "--model", "Qwen3.6-27B", "--gpu", "h100", "--gpus-per-node", "1", "--nodes", "1"]


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--arrival-rate", "nan"), ("--arrival-rate", "inf"), ("--gpu-memory-utilization", "nan"),
     ("--ttft-p95-ms", "inf"), ("--tpot-p95-ms", "-inf")],
)  # fmt: skip
def test_non_finite_numbers_are_refused_naming_the_option(capsys, option, value):
    rc, out, err = run(capsys, *EXPLICIT, f"{option}={value}")
    assert rc == 2 and not out
    assert f"{option}: must be a finite number" in err


def test_non_finite_numbers_in_an_inventory_name_the_path(capsys):
    rc, _out, err = run(capsys, "plan", "--site", str(CHAT), "-e", '{"models": [{"name": "q", "id": "Qwen3.6-27B", '
                        '"traffic": {"arrival_rate_rps": .nan}}]}')  # fmt: skip
    assert rc == 2 and "models[0].traffic.arrival_rate_rps: must be a finite number, got nan" in err


def test_malformed_yaml_given_to_the_command_names_file_line_and_column(capsys, tmp_path):
    arch = tmp_path / "arch.yaml"
    arch.write_text("hidden_size: [1, 2\nlayers: 3\n")
    rc, out, err = run(capsys, "plan", "--architecture", str(arch), "--gpu", "h100")
    assert rc == 2 and not out
    assert f"--architecture {arch}: not valid YAML at line 2, column 7" in err
    rc, _out, err = run(capsys, "plan", "--site", str(CHAT), "-e", '{"delivery": [1,')
    assert rc == 2 and "not valid YAML at line 1" in err and "-e '{\"delivery\": [1,'" in err
    rc, _out, err = run(capsys, "plan", "--site", str(CHAT), "-e", f"@{arch}")
    assert rc == 2 and f"-e @{arch}: not valid YAML at line 2, column 7" in err


def test_a_key_given_twice_in_an_inventory_file_is_refused_naming_file_and_line(capsys, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(CHAT, site)
    f = site / "group_vars" / "all" / "site.yml"
    f.write_text(f.read_text() + "\nserving_namespace: llm-other\n")
    rc, out, err = run(capsys, "plan", "--site", str(site))
    assert rc == 2 and not out
    assert f"{f}:" in err and "key 'serving_namespace' is given twice in one mapping (first at line" in err
    # nested mappings too, and one finding per duplicate
    f.write_text("a:\n  b: 1\n  b: 2\nc: [{d: 1, d: 2}]\n")
    found = inventory_files.duplicate_keys(str(f))
    assert [(d["line"], d["key"], d["first_line"]) for d in found] == [(3, "b", 2), (4, "d", 4)]


def test_an_alias_bomb_is_refused_without_being_expanded(capsys, tmp_path):
    """9^13 values: validating, templating or printing any of it would never end, so finishing at all proves the
    refusal came from the size check, which walks each distinct container once."""
    site = tmp_path / "site"
    shutil.copytree(CHAT, site)
    lines = ["z1: &z1 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"z{i}: &z{i} [{', '.join([f'*z{i - 1}'] * 9)}]" for i in range(2, 13)]
    lines.append("spot_tolerations: *z12")
    f = site / "group_vars" / "all" / "site.yml"
    f.write_text(f.read_text() + "\n" + "\n".join(lines) + "\n")
    t0 = time.monotonic()
    rc, _out, err = run(capsys, "plan", "--site", str(site))
    assert rc == 2 and "spot_tolerations: expands to more than 100000 values" in err
    assert len(err) < 1000  # the message does not print the value
    print(f"alias bomb refused in {time.monotonic() - t0:.2f} s")


def test_expanded_size_counts_shared_parts_each_time_and_stops_early():
    leaf = ["x"] * 9
    nested = [leaf] * 9
    assert schema.expanded_size(nested) == 1 + 9 * (1 + 9)
    loop: list = []
    loop.append(loop)
    assert schema.expanded_size(loop) > schema.MAX_EXPANDED_VALUES
    values = schema.Validator()._show(list(range(1000)), schema.Field())
    assert len(values) < 100


def test_an_unwritable_report_directory_is_named_before_anything_is_written(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rc, out, err = run(capsys, "plan", "--site", str(CHAT), "--report", str(blocker / "report"))
    assert rc == 2 and not out
    assert f"--report: {blocker} is a file, not a directory" in err
    rc, out, err = run(capsys, "plan", "--site", str(CHAT), "-e", "delivery=render", "-e", f"render_dir={blocker}/r")
    assert rc == 2 and "render_dir: " in err and "is a file, not a directory" in err


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "openshift-ingress", "default", "openshift"])
def test_system_namespaces_are_refused_as_serving_namespace(capsys, namespace):
    rc, _out, err = run(capsys, "plan", "--site", str(CHAT), "-e", f"serving_namespace={namespace}")
    assert rc == 2 and f"serving_namespace: {namespace!r} is a namespace of the cluster itself" in err


def _node(name, product, rdma=True):
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "8"}
    if rdma:
        labels["feature.node.kubernetes.io/rdma.capable"] = "true"
    node = {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    return cluster_facts.summarize_node(node)


def test_more_gpu_nodes_in_the_inventory_than_the_cluster_names_hardware_nodes_not_rdma():
    facts = cluster_facts.facts_from_inventory({"gpu": "h100", "gpus_per_node": 8, "nodes": 1})
    facts.update(
        source="cluster", nodes=[_node("gpu-0", "NVIDIA-H100-80GB-HBM3"), _node("gpu-1", "NVIDIA-H100-80GB-HBM3")]
    )
    facts = cluster_facts.summarize(facts)
    req = {"gpu_nodes": {"gpu": "h100", "nodes": 3}, "rdma": {"nodes": 3, "why": "hardware.interconnect is rdma"},
           "gpus": [{"gpu": "h100", "count": 16, "per_pod": 8}]}  # fmt: skip
    unmet = cluster_facts.evaluate(facts, req)
    assert any(
        u.startswith("GPU nodes: hardware.nodes says 3 node(s) with h100 GPUs, the cluster shows 2") for u in unmet
    )
    assert not [u for u in unmet if u.startswith("RDMA")], unmet
    # the RDMA check still speaks for the nodes that are there
    facts["nodes"][1] = _node("gpu-1", "NVIDIA-H100-80GB-HBM3", rdma=False)
    unmet = cluster_facts.evaluate(cluster_facts.summarize(facts), req)
    assert any(u.startswith("RDMA:") for u in unmet), unmet


def test_hosts_on_one_cluster_are_named_unless_meant():
    ids = {
        "onprem": {"cluster_id": "a", "kube_system_uid": "u1"},
        "burst": {"cluster_id": "a", "kube_system_uid": "u2"},
        "edge": {"cluster_id": None, "kube_system_uid": "u3"},
        "render": None,
    }
    (line,) = cluster_facts.shared_clusters(ids)
    assert line.startswith("hosts burst, onprem reach the same cluster (ClusterVersion clusterID a)")
    assert cluster_facts.shared_clusters(ids, {"onprem": ["burst"], "burst": ["onprem"]}) == []
    assert cluster_facts.shared_clusters(ids, {"onprem": ["burst"]}) == [line]  # both must say it
    ids["edge"]["kube_system_uid"] = ids["render"] = None
    assert cluster_facts.shared_clusters({"a": {"kube_system_uid": "k"}, "b": {"kube_system_uid": "k"}})
