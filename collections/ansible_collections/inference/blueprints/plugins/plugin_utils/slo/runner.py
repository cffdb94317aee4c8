# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive one model's endpoints with guidellm and record every request (run as its own process).

    python runner.py SPEC.json OUT.json

The SLO benchmark action starts this file with the controller's Python: guidellm's scheduler spawns
worker processes (multiprocessing ``spawn``) and sets uvloop as the event loop policy on import, neither
of which belongs inside ansible-playbook. The spec is ``slo.spec.model_spec``'s output; the output holds
one record per request (``RECORD_FIELDS``) and what the run saw.

Load generation is guidellm's (PyPI ``guidellm`` 0.8.1): its ``Scheduler`` with ``AsyncPoissonStrategy``
(open load at the arrival rate, at most ``max_concurrency`` in flight) or ``ConcurrentStrategy`` (closed
load), ``MaxNumberConstraint`` and ``MaxDurationConstraint`` (the bounds), and its ``OpenAIHTTPBackend``
for streaming chat completions with ``ignore_eos`` and ``max_completion_tokens`` (exact output lengths).
guidellm's dataset pipeline (``guidellm.data``, ``guidellm.benchmark``) needs PyTorch; the requests are
built here instead, so the benchmark runs without it (docs/verify.md, "Installing guidellm").

This file imports nothing from the collection: it runs from its path.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import resource
import sys
import time

# Per-request fields the analysis reads. ttft_ms: first token - request start; tpot_ms: (last token - first
# token) / (output tokens - 1), vLLM's benchmark TPOT and guidellm's ``inter_token_latency_ms``.
RECORD_FIELDS = ("i", "endpoint", "status", "start", "end", "ttft_ms", "tpot_ms", "prompt_tokens", "output_tokens")
PROBE_WORDS = 200
WORDS = [
    *[
        "the",
        "system",
        "answers",
        "questions",
        "about",
        "documents",
        "with",
        "care",
        "and",
        "cites",
        "each",
        "source",
        "it",
        "used",
    ],
    *[
        "while",
        "the",
        "operator",
        "watches",
        "latency",
        "budgets",
        "for",
        "every",
        "tenant",
        "and",
        "model",
        "class",
        "in",
        "the",
        "fleet",
    ],
]


def _lognormal(mean: float, p95: float) -> tuple[float, float]:
    """(mu, sigma) of a log-normal with this mean and 95th percentile (the planner's prompt length model)."""
    mean = max(float(mean), 1.0)
    p95 = max(float(p95), mean)
    if p95 <= mean:
        return math.log(mean), 0.0
    # p95 = exp(mu + 1.645 s), mean = exp(mu + s^2 / 2)  ->  s^2/2 - 1.645 s + ln(p95/mean) = 0
    z, r = 1.6448536269514722, math.log(p95 / mean)
    disc = z * z - 2 * r
    sigma = z - math.sqrt(disc) if disc > 0 else z
    return math.log(mean) - sigma * sigma / 2, sigma


def sample_lengths(shape: dict, n: int, seed: int) -> list[tuple[int, int]]:
    """(prompt tokens, output tokens) for n requests from the traffic's means and p95s, bounded by the limits."""
    rng = random.Random(seed)
    pm, ps = _lognormal(shape["prompt_tokens_mean"], shape["prompt_tokens_p95"])
    om, osig = _lognormal(shape["output_tokens_mean"], shape["output_tokens_p95"])
    out = []
    for _dummy in range(n):
        p = min(max(1, round(rng.lognormvariate(pm, ps))), shape["max_prompt_tokens"])
        o = min(max(2, round(rng.lognormvariate(om, osig))), shape["max_output_tokens"])
        out.append((p, o))
    return out


def _text(words: int, rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _dummy in range(max(1, words)))


def _tokens_per_word(url: str, model: str, timeout: float) -> float:
    """Prompt tokens the server counts per word of our text (its own tokenizer and chat template)."""
    import httpx  # guidellm's HTTP client

    def count(words: int) -> int:
        content = " ".join(WORDS[i % len(WORDS)] for i in range(words))
        body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 1, "stream": False}
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout, verify=False)
        r.raise_for_status()
        return int(r.json()["usage"]["prompt_tokens"])

    small, large = count(10), count(10 + PROBE_WORDS)
    return max((large - small) / PROBE_WORDS, 0.05)


def build_requests(spec: dict, per_word: float):
    """guidellm conversation graphs of one request each, and the endpoint each goes to (round robin)."""
    from guidellm.scheduler.schemas.conversation_graph import (
        GenerativeConversationGraph,
        GenerativeConversationNode,
    )
    from guidellm.schemas import GenerationRequest, UsageMetrics

    rng = random.Random(spec["seed"])
    shape = spec["shape"]
    n = spec["max_requests"]
    prefix_tokens = int(round(shape["prompt_tokens_mean"] * shape.get("shared_prefix_fraction", 0.0)))
    prefix = _text(round(prefix_tokens / per_word), random.Random(spec["seed"] + 1)) if prefix_tokens else ""
    graphs = []
    for i, (p, o) in enumerate(sample_lengths(shape, n, spec["seed"])):
        own = max(1, p - prefix_tokens)
        columns = {"text_column": [_text(round(own / per_word), rng)]}
        if prefix:
            columns["prefix_column"] = [prefix]
        if spec.get("prefill_only"):
            o = 1
        req = GenerationRequest(
            request_id=f"{i}:{i % len(spec['endpoints'])}",
            columns=columns,
            output_metrics=UsageMetrics(text_tokens=o),
        )
        node = GenerativeConversationNode(node_id="n", agent_id=f"a{i}", request=req)
        graphs.append(GenerativeConversationGraph.from_nodes_with_parents({"n": node}, {}))
    return graphs


try:  # the runner needs guidellm; importing this file without it (ansible-test sanity) defines a stand-in base
    from guidellm.backends import OpenAIHTTPBackend as _Base
except ImportError:  # pragma: no cover
    _Base = object


class RoundRobinBackend(_Base):
    """guidellm's OpenAI HTTP backend sending each request to the endpoint the request names (direct routing
    over a pool's replicas when no gateway fronts them). Module level: guidellm pickles it to its workers."""

    def __init__(self, arguments, endpoints: list[str]):
        super().__init__(arguments)
        self._endpoints = endpoints

    async def _prepare_resolve_request(self, request, history=None):
        handler, arguments, kwargs = await super()._prepare_resolve_request(request, history)
        target = self._endpoints[int(request.request_id.split(":")[1])]
        kwargs["url"] = target + kwargs["url"][len(self._args.target) :]
        return handler, arguments, kwargs


def _backend(spec: dict):
    from guidellm.schemas.backends import OpenAIHTTPBackendArgs

    endpoints = [e.rstrip("/") for e in spec["endpoints"]]
    args = OpenAIHTTPBackendArgs(
        target=endpoints[0],
        model=spec["served_name"],
        request_format="/v1/chat/completions",
        http2=False,
        timeout=spec["request_timeout"],
        validate_backend=False,
        api_key=spec.get("api_key") or None,
    )
    return RoundRobinBackend(args, endpoints)


def _strategy(spec: dict):
    from guidellm.scheduler import AsyncPoissonStrategy, ConcurrentStrategy

    if spec.get("rate"):
        return AsyncPoissonStrategy(
            rate=spec["rate"], max_concurrency=spec["max_concurrency"], random_seed=spec["seed"]
        )
    return ConcurrentStrategy(streams=spec["max_concurrency"])


async def _run(spec: dict, graphs) -> list[dict]:
    from guidellm.scheduler import MaxDurationConstraint, MaxNumberConstraint, NonDistributedEnvironment, Scheduler

    records = []
    async for response, request, info, _state in Scheduler().run(
        requests=graphs,
        backend=_backend(spec),
        strategy=_strategy(spec),
        env=NonDistributedEnvironment(),
        max_requests=MaxNumberConstraint(args={"count": spec["max_requests"]}),
        max_duration=MaxDurationConstraint(args={"seconds": spec["max_seconds"]}),
    ):
        if info.status not in ("completed", "errored", "cancelled"):
            continue
        i, endpoint = (int(x) for x in request.request_id.split(":"))
        rec = {"i": i, "endpoint": endpoint, "status": info.status, "error": info.error}
        t = info.timings
        rec["start"], rec["end"] = t.request_start, t.request_end
        rec.update(ttft_ms=None, tpot_ms=None, prompt_tokens=None, output_tokens=None)
        if response is not None and info.status == "completed":
            stats = response.compile_stats(request, info)
            rec.update(
                ttft_ms=stats.time_to_first_token_ms,
                tpot_ms=stats.inter_token_latency_ms,
                prompt_tokens=stats.prompt_tokens,
                output_tokens=stats.output_tokens,
            )
        records.append(rec)
    return records


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", str(spec.get("worker_processes", 1)))
    os.environ.setdefault("GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL", "ERROR")
    out: dict = {"spec": spec, "records": [], "error": None}
    started = time.time()
    try:
        per_word = spec.get("tokens_per_word") or _tokens_per_word(
            spec["endpoints"][0].rstrip("/"), spec["served_name"], spec["request_timeout"]
        )
        out["tokens_per_word"] = per_word
        out["records"] = asyncio.run(_run(spec, build_requests(spec, per_word)))
    except Exception as e:  # noqa: BLE001 - reported to the action, which names the model
        out["error"] = f"{type(e).__name__}: {e}"
    out["wall_s"] = time.time() - started
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out["client_cpu_s"] = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    with open(argv[2], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
