"""Traffic shapes of the data-plane tests and the figures they produce (also printed by tests/bench)."""

from __future__ import annotations

import asyncio
import json
import random
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
