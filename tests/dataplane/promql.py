"""Just enough Prometheus for the data-plane tests: read the text exposition of a /metrics page,
list the series selectors a PromQL expression reads, and evaluate the two query shapes our KEDA
triggers use (``sum(<selector>)`` and ``sum(rate(<selector>[w]))``) on scraped samples.

Labels a scrape adds (Prometheus target labels: ``namespace``, ``pod``, ``service``, ``job``, ...)
are not on a /metrics page; ``SCRAPE_LABELS`` lists those our rules may filter on, and
``target_labels`` gives their values for a pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Labels the Prometheus Operator's PodMonitor/ServiceMonitor scrape adds to every series.
SCRAPE_LABELS = ("namespace", "pod", "container", "endpoint", "service", "job", "instance")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
# A metric name with an optional label matcher list, as it appears inside a PromQL expression.
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')
_FUNCS = {"sum", "max", "min", "avg", "rate", "increase", "deriv", "histogram_quantile", "by", "offset", "and", "or"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict
    value: float


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple  # ((label, op, value), ...)

    def matches(self, s: Sample, extra: dict | None = None) -> bool:
        if s.name != self.metric:
            return False
        labels = {**s.labels, **(extra or {})}
        for label, op, value in self.matchers:
            have = labels.get(label, "")
            ok = {
                "=": have == value,
                "!=": have != value,
                "=~": re.fullmatch(value, have) is not None,
                "!~": re.fullmatch(value, have) is None,
            }[op]
            if not ok:
                return False
        return True

    def __str__(self) -> str:
        inner = ",".join(f'{k}{op}"{v}"' for k, op, v in self.matchers)
        return f"{self.metric}{{{inner}}}"


def parse_exposition(text: str) -> list[Sample]:
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = {k: v.encode().decode("unicode_escape") for k, v in _LABEL.findall(m.group(3) or "")}
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.append(Sample(m.group(1), labels, value))
    return out


def selectors(expr: str) -> list[Selector]:
    """Every series selector an expression reads (metric names with a label matcher list)."""
    out = []
    for metric, body in _SELECTOR.findall(expr):
        if metric in _FUNCS:
            continue
        out.append(Selector(metric, tuple(_MATCHER.findall(body))))
    return out


def family(metric: str) -> tuple[str, ...]:
    """The names a histogram/counter selector may appear under on a /metrics page."""
    for suffix in ("_bucket", "_sum", "_count"):
        if metric.endswith(suffix):
            return (metric,)
    return (metric, metric + "_total") if not metric.endswith("_total") else (metric,)


_SUM = re.compile(r"^\s*sum\s*\(\s*([^()]+?)\s*\)\s*$")
_SUM_RATE = re.compile(r"^\s*sum\s*\(\s*rate\s*\(\s*([^()\[\]]+?)\s*\[([0-9]+[smh])\]\s*\)\s*\)\s*$")


def evaluate(expr: str, now: list[Sample], before: list[Sample] | None = None, seconds: float = 0.0) -> float | None:
    """``sum(sel)`` on ``now``; ``sum(rate(sel[w]))`` from two scrapes ``seconds`` apart. None: no series."""
    m = _SUM.match(expr)
    if m and not m.group(1).startswith("rate"):
        (sel,) = selectors(m.group(1)) or [Selector(m.group(1).strip(), ())]
        values = [s.value for s in now if sel.matches(s)]
        return sum(values) if values else None
    m = _SUM_RATE.match(expr)
    if m:
        (sel,) = selectors(m.group(1)) or [Selector(m.group(1).strip(), ())]
        if before is None or seconds <= 0:
            raise ValueError("a rate needs two scrapes")
        a = {tuple(sorted(s.labels.items())): s.value for s in before if sel.matches(s)}
        b = {tuple(sorted(s.labels.items())): s.value for s in now if sel.matches(s)}
        if not b:
            return None
        return sum(max(0.0, v - a.get(k, 0.0)) for k, v in b.items()) / seconds
    raise ValueError(f"query shape not evaluated here: {expr}")
