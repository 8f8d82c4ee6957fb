"""The service's Prometheus metrics (names of SPEC §6), in a registry of their own.

Label children are bound once (per action, per feature, per reload result), so counting a
decision is one ``inc()`` on a prebuilt child, with no label lookup per request.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: Reload outcomes, the values of ``clefprove_reloads_total{result}``.
RELOAD_RESULTS = ("accepted", "refused", "invalid", "unauthorized")

#: Decision-time buckets (seconds): a decision takes microseconds, a batch milliseconds.
DECISION_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip

#: Event-loop lag buckets (seconds): how late the probe's timer ran (uvloop's timers have a
#: 1 ms resolution, so lags below it are the timer's rounding, not a stall).
LAG_BUCKETS = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip

#: The event loop's steps of an admission, the values of
#: ``clefprove_reload_loop_step_seconds{step}`` (docs/serve.md, "Metrics").
RELOAD_STEPS = (
    "receive", "digest", "send", "read", "decode", "rebuild", "serve", "swap", "release",
    "answer", "write", "bookkeeping", "diff",
)  # fmt: skip

#: Step buckets (seconds): a step takes microseconds; a stall is milliseconds.
STEP_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001, 0.002, 0.005, 0.01, 0.025, 0.1,
)  # fmt: skip

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Every metric the service exports."""

    def __init__(self) -> None:
        # *_created series: noise for a scraper of this service (prometheus_client: untyped)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(
            "clefprove_decisions_total", "Decisions answered, by action.", ["action"], registry=r
        )
        self.decision_seconds = Histogram(
            "clefprove_decision_seconds",
            "Time to answer one POST /decide (parse, decide, encode the answer).",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.input_errors = Counter(
            "clefprove_input_errors_total", "POST /decide requests refused as bad input.",
            registry=r,
        )  # fmt: skip
        self.out_of_bounds = Counter(
            "clefprove_feature_out_of_bounds_total",
            "Input values outside their feature's [min, max], clipped into the domain.",
            ["feature"],
            registry=r,
        )
        self.reloads = Counter(
            "clefprove_reloads_total", "Reload attempts, by result.", ["result"], registry=r
        )
        self.rollbacks = Counter(
            "clefprove_rollbacks_total", "Rollback attempts, by result.", ["result"], registry=r
        )
        self._info: tuple[str, str, str] | None = None
        r.register(_ModelInfo(self))  # the served model, built when scraped
        self.loop_lag = Histogram(
            "clefprove_event_loop_lag_seconds",
            "How late a timer asked for every 20 ms ran on the event loop (a stall: the loop "
            "was busy or waited for the CPU).",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        #: the children of ``clefprove_reload_loop_step_seconds``, by step
        self.reload_steps = {step: LoopHistogram(STEP_BUCKETS) for step in RELOAD_STEPS}
        r.register(_Steps(self.reload_steps))
        for result in RELOAD_RESULTS:
            self.reloads.labels(result)
            self.rollbacks.labels(result)

    def bind_model(
        self, actions: Sequence[str], features: Sequence[str]
    ) -> tuple[list[Counter], dict[str, Counter]]:
        """Prebuilt children for one model's actions (by index) and numeric features."""
        return [self.decisions.labels(a) for a in actions], {
            f: self.out_of_bounds.labels(f) for f in features
        }

    def serve(self, name: str, version: str, sha256: str) -> None:
        """Make ``clefprove_model_info`` name the served model only (one assignment: the
        series is built when ``/metrics`` is scraped, not at each swap)."""
        self._info = (name, version, sha256)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class LoopHistogram:
    """A histogram observed by the event loop only (no lock, one ``bisect`` and two
    additions: a prometheus ``Histogram.observe`` takes a lock per bucket and sum, about
    2-3 µs, a dozen times per admission), exported by a collector."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts per upper bound, ``+Inf`` last (Prometheus' form)."""
        out, total = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(total)))
        return out


class _Steps:
    """The collector of ``clefprove_reload_loop_step_seconds{step}``."""

    def __init__(self, steps: dict[str, LoopHistogram]) -> None:
        self.steps = steps

    def collect(self) -> Iterator[Any]:
        family = HistogramMetricFamily(
            "clefprove_reload_loop_step_seconds",
            "The event loop's time in each step of an admission (waits excluded).",
            labels=["step"],
        )
        for step, h in self.steps.items():
            family.add_metric([step], h.buckets(), h.sum)
        yield family


class _ModelInfo:
    """The collector of ``clefprove_model_info{name,version,sha256}``: 1 for the served
    model (only that one)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        family = GaugeMetricFamily(
            "clefprove_model_info", "The served model (value 1).",
            labels=["name", "version", "sha256"],
        )  # fmt: skip
        info = self.metrics._info
        if info is not None:
            family.add_metric(list(info), 1.0)
        yield family
