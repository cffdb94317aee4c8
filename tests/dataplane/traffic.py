"""Traffic shapes of the data-plane tests and the figures they produce (also printed by tests/bench)."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter, defaultdict

CHAT_PATH = "/v1/chat/completions"


def chat_body(model: str, system: str, user: str, max_tokens: int = 8, stream: bool = False) -> bytes:
    return json.dumps(
        {
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": max_tokens,
            "stream": stream,
        }
    ).encode()


def conversation_prefix(group: int, chars: int = 6000) -> str:
    """A long system prompt of its own per conversation group (the shared prefix)."""
    rng = random.Random(group)
    words = [f"w{rng.randrange(10**6)}" for _ in range(chars // 8)]
    return f"conversation {group}: " + " ".join(words)


async def prefix_affinity(dp, groups: int = 8, turns: int = 6, objective: str | None = None) -> dict:
    """Send ``turns`` rounds, each one request per conversation group (all groups at once); return the
    share of follow-up requests that land on the endpoint that served the group's first request."""
    model = dp.model["served_name"]
    headers = {dp.model["scheduler"]["objective_header"]: objective} if objective else {}
    prefixes = [conversation_prefix(g) for g in range(groups)]
    holder: dict[int, str] = {}
    landed: dict[int, list[str]] = defaultdict(list)
    statuses: Counter = Counter()
    async with dp.gateway() as gw:
        for turn in range(turns):
            replies = await asyncio.gather(
                *(
                    gw.post(CHAT_PATH, chat_body(model, prefixes[g], f"turn {turn} of {g}: go on"), headers)
                    for g in range(groups)
                )
            )
            for g, r in enumerate(replies):
                statuses[r.status] += 1
                if r.status != 200:
                    continue
                if turn == 0:
                    holder[g] = r.endpoint
                else:
                    landed[g].append(r.endpoint)
    follow = [(g, e) for g, es in landed.items() for e in es]
    hits = sum(1 for g, e in follow if e == holder.get(g))
    return {
        "share": hits / len(follow) if follow else 0.0,
        "requests": groups * turns,
        "statuses": dict(statuses),
        "endpoints_used": len({e for es in landed.values() for e in es} | set(holder.values())),
    }


async def ask(gw, model: dict, i: int, system: str = "fault test") -> tuple[int, str | None]:
    """One chat request of 30 tokens: (status, the endpoint the picker chose); status 0 when it failed outright."""
    try:
        reply = await gw.post(CHAT_PATH, chat_body(model["served_name"], system, f"question {i}", max_tokens=30))
        return reply.status, reply.endpoint
    except Exception:  # noqa: BLE001 - a failed request is what is counted
        return 0, None


async def steady(
    dp, seconds: float, *, workers: int = 4, fresh: bool = False, stop: threading.Event | None = None
) -> list[tuple[float, int, str | None]]:
    """``workers`` clients of ``dp``'s model, each sending one request after the other for ``seconds`` (or until
    ``stop`` is set): (sent at, status, endpoint). ``fresh``: each request starts a new conversation (a prefix no
    engine holds yet)."""
    out: list[tuple[float, int, str | None]] = []
    end = time.monotonic() + seconds

    def going() -> bool:
        return time.monotonic() < end and not (stop and stop.is_set())

    async def worker(w: int) -> None:
        i = 0
        async with dp.gateway() as gw:
            while going():
                t = time.monotonic()
                n = 1000 * w + i
                status, endpoint = await ask(gw, dp.model, n, f"conversation {n}" if fresh else "fault test")
                out.append((t, status, endpoint))
                i += 1

    await asyncio.gather(*(worker(w) for w in range(workers)))
    return out
