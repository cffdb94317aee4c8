# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_args filter: the serving stage's own normalisation, per engine version."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.inference.blueprints.plugins.filter.vllm_args import vllm_args

KVT = '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def test_quotes_json_and_drops_what_the_service_sets():
    out = vllm_args(["--served-model-name=m", "--tensor-parallel-size=2", "--max-model-len=32768", KVT])
    assert out == '--max-model-len=32768 --kv-transfer-config=\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
    assert vllm_args([{"--max-num-seqs": 64}, "--enable-prefix-caching"], output="names") == [
        "--max-num-seqs",
        "--enable-prefix-caching",
    ]


def test_the_flag_set_is_the_engine_versions():
    # 0.33 spells "off" --disable-X; 0.24 only knows --no-enable-X (docs/planner.md, Engine versions)
    assert vllm_args(["--disable-prefix-caching"], output="list") == ["--disable-prefix-caching"]
    with pytest.raises(AnsibleFilterError, match="'--disable-prefix-caching' is not a vLLM 0.24.0 flag"):
        vllm_args(["--disable-prefix-caching"], vllm_version="0.24.0")
    assert vllm_args(["--no-enable-prefix-caching"], vllm_version="0.24.0") == "--no-enable-prefix-caching"
    with pytest.raises(AnsibleFilterError, match=r"no flag set for vLLM 0.10.0; supported: 0.24, 0.33"):
        vllm_args([], vllm_version="0.10.0")


def test_typos_and_repeats_are_errors_naming_the_flag():
    with pytest.raises(AnsibleFilterError, match="'--max-num-seq' is not a vLLM 0.33.0 flag"):
        vllm_args(["--max-num-seq=64"])
    with pytest.raises(AnsibleFilterError, match="'--max-model-len' is given twice"):
        vllm_args(["--max-model-len=1", "--max-model-len=2"])
    assert vllm_args(["--max-num-seq=64"], strict=False) == "--max-num-seq=64"
