# -*- coding: utf-8 -*-
# Copyright (c) 2026 inference.blueprints maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: UP009, E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: plan
short_description: Size a vLLM deployment - layout, memory, KV capacity, prefill/decode pools and engine arguments
version_added: 0.1.0
description:
  - Runs the collection's sizing planner for one model on one cluster's hardware and returns the plan that the
    serving roles read (C(docs/contracts.md) section 3). Roles never compute sizes themselves.
  - The planner follows vLLM's own KV-cache accounting (C(gpu_memory_utilization) budget, weights, activation
    and CUDA-graph overhead, page and block sizes, hybrid Gated DeltaNet state blocks) and the layout rules of
    the seed article's section 3 (quantize first, minimum TP that fits with KV headroom, then DP, EP+DP for MoE
    within a node, PP only when a node is not enough, DCP for long decode when TP >= 2, PCP for long prefill).
  - Prefill and decode pools are sized with Little's law and roofline per-GPU rates whose efficiency factors are
    policy inputs; speculative decoding, the KV connector and the KV dtype follow the seed's tables.
  - Every decision comes with a one-line reason in RV(plan.decisions); differences between the seed article's
    figures and vLLM's arithmetic are listed in RV(plan.seed_comparison).
  - Runs on the controller as an action plugin (the model and GPU catalogs are data files). Never changes
    anything, so it is safe in check mode.
  - Inputs that cannot be planned (unknown model or GPU, zero GPUs, a prompt longer than O(max_model_len),
    negative rates, a model that does not fit, an SLO no size can meet) fail with a message that names the
    input, says what is wrong and by how much, and what would work.
author:
  - inference.blueprints maintainers (@inference-blueprints)
options:
  model:
    description:
      - Model catalog id, by its public name, for example V(Qwen3.6-27B), V(Qwen3.5-35B-A3B), V(Qwen3.5-397B-A17B),
        V(Llama-3.3-70B-Instruct), V(Qwen3-30B-A3B) or V(DeepSeek-V3).
      - One of O(model) and O(model_architecture) is required.
    type: str
  model_architecture:
    description:
      - An explicit architecture instead of a catalog entry, with the catalog's fields (see
        C(plugins/module_utils/planner/catalog/models.yaml)).
      - Required keys are C(kind) (V(dense) or V(moe)), C(attention) (V(gqa), V(mla) or V(hybrid_gdn)), C(layers),
        C(full_attention_layers), C(hidden_size), C(num_attention_heads), C(num_key_value_heads), C(head_dim),
        C(params_b), C(active_params_b), C(embedding_params_b), C(lm_head_params_b) and
        C(max_position_embeddings); MoE models add C(experts), C(experts_per_token) and C(expert_params_b),
        hybrid models a C(gdn) dict, MLA models an C(mla) dict. C(id) names it.
      - Or the fields of the model's Hugging Face C(config.json), whose C(model_type) is one of V(llama),
        V(mistral), V(qwen2), V(qwen3), V(granite), V(mixtral), V(qwen2_moe) or V(qwen3_moe). The planner counts
        the parameters from the layer shapes and reads the checkpoint's precision from C(quantization_config), the
        same conversion as C(blueprints plan --architecture config.json) and a site's C(models[].architecture).
    type: dict
  model_quantization:
    description:
      - The precision of the checkpoint O(model_architecture) describes when its config.json has no
        C(quantization_config) (one that has it must agree). V(fp8-channel) is per-tensor or per-channel FP8,
        V(int4) weight-only 4-bit (AWQ, GPTQ).
    type: str
    choices: [bf16, fp8-block, fp8-channel, int4, nvfp4]
  artifact:
    description:
      - The artifact vLLM loads (V(hf://org/name), V(pvc://...), V(oci://...)); the plan's C(served_model) and
        whether vLLM quantizes it at load follow from it (a site passes C(models[].artifact.uri)).
    type: str
  name:
    description:
      - Kubernetes (DNS-1123) name of the model service, echoed as C(plan.model.name).
      - Defaults to the model id, lower-cased.
    type: str
  blueprint:
    description:
      - Name of the blueprint the plan is for, echoed in the plan. The planner knows no blueprint by name -
        pass the blueprint file's C(policy) as O(policy) and its C(defaults.traffic) as O(traffic_defaults)
        (the P(inference.blueprints.site#module) action does).
    type: str
    default: chat
  gpu:
    description:
      - GPU catalog id of the cluster's (prefill or only) GPU pool, one of V(h100), V(h200), V(b200),
        V(a100-80gb), V(l40s), V(mi300x), V(rtx-pro-6000).
    type: str
    required: true
  gpus_per_node:
    description:
      - GPUs per node. Tensor parallelism never spans nodes.
    type: int
    default: 1
  nodes:
    description:
      - Number of GPU nodes.
    type: int
    default: 1
  interconnect:
    description:
      - Fabric between nodes. V(nvlink) means intra-node only (no RDMA NICs), V(rdma) enables cross-node KV
        transfer for P/D, V(ethernet) keeps serving aggregated.
      - Defaults to V(rdma) with several nodes, else V(nvlink).
    type: str
    choices: [nvlink, rdma, ethernet]
  decode_gpu:
    description:
      - GPU catalog id of a second node pool for the decode side of a P/D split (for example V(l40s)).
    type: str
  decode_gpus_per_node:
    description:
      - GPUs per node of the decode pool. Defaults to O(gpus_per_node).
    type: int
  decode_nodes:
    description:
      - Nodes of the decode pool. Defaults to 1.
    type: int
  weights:
    description:
      - Weight precision. V(fp4) is NVFP4 (needs FP4 tensor cores, V(b200) or V(rtx-pro-6000)).
      - V(int4) (alias V(w4a16)) is a weight-only 4-bit checkpoint (AWQ, GPTQ), served as it is stored.
      - V(auto) takes the first of the policy's C(allowed_weights) that the GPU runs and that fits a node.
    type: str
    default: auto
    choices: [auto, bf16, fp8, fp4, nvfp4, int4, w4a16]
  kv_cache_dtype:
    description:
      - KV-cache dtype passed to vLLM. V(auto) is the model dtype (BF16).
      - When omitted the planner picks V(fp8) for quantized weights on GPUs with FP8 support, else V(auto).
    type: str
    choices: [auto, bf16, bfloat16, fp8, nvfp4]
  max_model_len:
    description:
      - Maximum context length per sequence. Defaults to the model's native window; longer values are refused.
    type: int
  contexts:
    description:
      - Context lengths for the capacity table C(plan.kv.max_concurrency). Defaults to 8192, 32768 and 131072
        (those not above O(max_model_len)) plus O(max_model_len).
    type: list
    elements: int
  traffic:
    description:
      - Traffic shape. Keys C(prompt_tokens_mean), C(prompt_tokens_p95), C(output_tokens_mean),
        C(output_tokens_p95), C(concurrent_sessions), C(arrival_rate_rps). Missing keys take
        O(traffic_defaults); with only one of C(concurrent_sessions) and C(arrival_rate_rps), Little's law gives
        the other.
    type: dict
  traffic_defaults:
    description:
      - Example traffic (same keys as O(traffic)) for the keys O(traffic) leaves out, usually a blueprint file's
        C(defaults.traffic); fitted to the model's context window. Without it, the planner's own example
        (C(policies.yaml) C(example)).
    type: dict
  slo:
    description:
      - Service-level objectives. Keys C(ttft_p95_ms) and C(tpot_p95_ms); missing keys take the planner's
        example (C(policies.yaml) C(example)).
    type: dict
  policy:
    description:
      - Blueprint policy, usually the C(policy) section of C(blueprints/<blueprint>.yml) merged with the
        model's own C(policy). Unknown keys fail, naming the valid ones.
      - Keys (docs/planner.md) are C(disaggregation), C(speculative), C(tool_calling_heavy), C(code_completion),
        C(kv_offload), C(kv_offload_gib), C(kv_offload_max_gib_per_gpu), C(kv_connector), C(shared_kv_cache),
        C(prefix_caching), C(chunked_prefill), C(allowed_weights), C(max_num_seqs), C(batch_sizing),
        C(max_num_batched_tokens), C(expert_routing_skew), C(router), C(slot_queue),
        C(prefill_mfu), C(decode_mbu), C(target_utilization), C(kv_headroom_fraction), C(pd_cost_margin),
        C(long_context_tokens), C(dcp), C(pcp), C(eplb), C(language_model_only), C(overhead_gib),
        C(scale_to_zero), C(min_replicas), C(output_token_cap).
    type: dict
    default: {}
  gpu_memory_utilization:
    description:
      - Share of each GPU's memory vLLM may use (vLLM 0.33 default 0.92).
    type: float
    default: 0.92
  kv_cache_memory_bytes:
    description:
      - Fixed KV pool per GPU in bytes (vLLM C(--kv-cache-memory-bytes)); replaces the utilization budget.
    type: int
  quantized_checkpoint:
    description:
      - The artifact is already quantized to O(weights). When false and O(weights=fp8), vLLM quantizes online
        (C(--quantization=fp8)).
    type: bool
    default: true
  vllm_version:
    description:
      - vLLM version the plan is written for; its flag set (C(catalog/vllm_flags_<minor>.yaml)) and its row of the
        engine compatibility table decide the engine arguments and features. 0.24.x (OpenShift AI 3.5.0's presets)
        and 0.33.x are available.
    type: str
    default: 0.33.0
attributes:
  action:
    support: full
    description: The planner runs in an action plugin on the controller; nothing is copied to the target.
  check_mode:
    support: full
    description: Pure computation; the plan is returned in check mode too.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: all
    description: Runs on the controller whatever the target host is.
notes:
  - The result is never C(changed).
  - The same planner is available as the C(blueprints plan) command.
seealso:
  - name: Planner documentation
    description: How the planner decides, every policy key, and where the seed article and vLLM disagree.
    link: https://github.com/inference-blueprints/inference-blueprints/blob/main/docs/planner.md
"""

EXAMPLES = r"""
- name: Plan Qwen3.6-27B on one RTX PRO 6000 (edge)
  inference.blueprints.plan:
    model: Qwen3.6-27B
    gpu: rtx-pro-6000
    weights: fp8
    kv_cache_dtype: fp8
    blueprint: edge_sno
  register: edge

- name: Show the KV capacity table
  ansible.builtin.debug:
    var: edge.plan.kv.max_concurrency

- name: Plan a disaggregated chat deployment with an L40S decode pool
  inference.blueprints.plan:
    model: Qwen3.5-35B-A3B
    name: qwen-chat
    gpu: h100
    gpus_per_node: 8
    nodes: 2
    interconnect: rdma
    decode_gpu: l40s
    decode_gpus_per_node: 4
    decode_nodes: 8
    weights: fp8
    traffic:
      prompt_tokens_mean: 800
      output_tokens_mean: 200
      concurrent_sessions: 5000
    slo:
      ttft_p95_ms: 1000
      tpot_p95_ms: 45
    policy: "{{ (lookup('ansible.builtin.file', 'blueprints/chat.yml') | from_yaml).policy }}"
  register: chat
"""

RETURN = r"""
plan:
  description:
    - The plan (docs/contracts.md section 3). All sizes are per GPU unless the key says otherwise; GiB = 2^30 B.
  returned: success
  type: dict
  contains:
    model:
      description: C(id), C(name), C(hf_repo), C(kind), C(attention) and the catalog C(source) note.
      type: dict
      returned: success
    hardware:
      description: Echo of the hardware inputs (C(gpu), C(gpus_per_node), C(nodes), C(interconnect), C(decode_*)).
      type: dict
      returned: success
    memory:
      description:
        - C(weights_gib_per_gpu), C(kv_pool_gib_per_gpu), C(overhead_gib_per_gpu), C(budget_gib_per_gpu),
          C(gpu_memory_gib) and C(gpu_memory_utilization) of the main (decode or serve) pool.
      type: dict
      returned: success
      sample: {weights_gib_per_gpu: 28.43, kv_pool_gib_per_gpu: 52.22, overhead_gib_per_gpu: 7.3}
    kv:
      description:
        - C(dtype), C(bytes_per_token) (whole model), C(bytes_per_token_per_gpu) (with TP replication and DCP),
          C(state_bytes_per_seq) (linear-attention state of hybrid models), C(block_size), C(blocks), C(tokens),
          C(reported_tokens) (vLLM's log figure) and C(max_concurrency), a map from context length (string) to
          sequences per engine.
      type: dict
      returned: success
    layout:
      description:
        - C(tp), C(pp), C(dp) (total data-parallel degree), C(ep), C(dcp), C(pcp), C(replicas), C(dp_per_engine).
      type: dict
      returned: success
      sample: {tp: 2, pp: 1, dp: 4, ep: 8, dcp: 1, pcp: 1}
    disaggregated:
      description: Whether prefill and decode run in separate pools.
      type: bool
      returned: success
    pools:
      description:
        - C(prefill), C(decode) and C(serve); C(prefill) and C(decode) are null when not disaggregated, C(serve)
          is null when disaggregated. Each pool has C(gpu), C(gpus), C(replicas), C(gpus_per_replica), C(tp),
          C(pp), C(dp), C(ep), C(dcp), C(pcp), C(max_num_seqs), C(memory), C(kv) and C(engine_args).
        - C(max_num_seqs) (also C(--max-num-seqs) in C(engine_args)) of a serve or decode pool is the batch the plan
          sized and its latency figures describe; a policy C(max_num_seqs) only lowers it.
      type: dict
      returned: success
    speculative:
      description: C({method, model, num_speculative_tokens}) or null.
      type: dict
      returned: success
    kv_connector:
      description: C({name, role, transport, connectors}) or null.
      type: dict
      returned: success
    engine_args:
      description: vLLM arguments (C(--flag=value) or C(--flag)) of the main (decode or serve) pool.
      type: list
      elements: str
      returned: success
    vllm_version:
      description: vLLM version the arguments are for.
      type: str
      returned: success
    decisions:
      description: Every decision as C({what, choice, why}), plus C(unit) when the choice is a number with one.
      type: list
      elements: dict
      returned: success
    units:
      description:
        - The unit of every figure whose key does not name it (C(cost_per_hour), C(max_num_seqs), ...), then the
          units of the key suffixes (C(*_ms), C(*_gib), ...).
      type: dict
      returned: success
    seed_comparison:
      description: Where the seed article's figures differ from vLLM's arithmetic for this plan.
      type: list
      elements: dict
      returned: success
    warnings:
      description: Shortfalls the plan could not fix (for example traffic above the hardware's capacity).
      type: list
      elements: str
      returned: success
field:
  description: The input a failure is about (dotted path).
  returned: failure
  type: str
  sample: traffic.arrival_rate_rps
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inference.blueprints.plugins.module_utils.planner.spec import ARGUMENT_SPEC, REQUIRED_ONE_OF


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_one_of=REQUIRED_ONE_OF, supports_check_mode=True)
    # The action plugin of the same name runs the planner on the controller; reaching this code means the
    # module was invoked without it.
    module.fail_json(msg="inference.blueprints.plan runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
