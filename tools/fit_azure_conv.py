#!/usr/bin/env python3
"""Fit orrery's default synthetic serving workload to the Azure LLM inference conversation trace.

Usage: python3 tools/fit_azure_conv.py [path/to/AzureLLMInferenceTrace_conv.csv]
(default: ../shared/data/traces/AzureLLMInferenceTrace_conv.csv relative to the repository root).

Pure Python 3 (no numpy). Prints the figures that src/serve/workload.cc (kAzureConv*) and
docs/workloads.md cite:
  - arrival rate        (N - 1) / (last - first timestamp), requests/s
  - inter-arrival CV    stddev / mean of consecutive gaps (population stddev), and the Gamma shape
                        1/CV^2 that gives a renewal process with that CV
  - lengths             lognormal maximum-likelihood fit: mu = mean(ln x), sigma = population stddev
                        of ln x; plus mean, min, max and type-7 (numpy default) quantiles p50/p90/p99.
Source: Azure/AzurePublicDataset data/AzureLLMInferenceTrace_conv.csv (CC-BY-4.0), commit
b469a113cedca53ddc3bdea71a143dc4b7d8700c; Patel et al., "Splitwise", ISCA 2024.
"""
import csv
import math
import os
import sys
from datetime import datetime


def quantile(sorted_xs, q):
    h = (len(sorted_xs) - 1) * q
    i = math.floor(h)
    if i + 1 >= len(sorted_xs):
        return float(sorted_xs[-1])
    return sorted_xs[i] + (h - i) * (sorted_xs[i + 1] - sorted_xs[i])


def moments(xs):
    n = len(xs)
    m = sum(xs) / n
    v = sum((x - m) ** 2 for x in xs) / n
    return m, math.sqrt(v)


def describe(name, xs):
    s = sorted(xs)
    mean, _ = moments(xs)
    mu, sigma = moments([math.log(x) for x in xs])
    print(f"{name}: n={len(xs)} mean={mean:.4f} min={s[0]} max={s[-1]} "
          f"p50={quantile(s, 0.5):.1f} p90={quantile(s, 0.9):.1f} p99={quantile(s, 0.99):.1f} "
          f"lognormal_mu={mu:.6f} lognormal_sigma={sigma:.6f} "
          f"(lognormal mean exp(mu+sigma^2/2)={math.exp(mu + sigma * sigma / 2):.2f})")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "shared", "data", "traces", "AzureLLMInferenceTrace_conv.csv")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    times, prompts, outputs = [], [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            # 'YYYY-MM-DD HH:MM:SS.fffffff': 7 fractional digits; keep 6 for datetime, add the 7th.
            ts = row["TIMESTAMP"].strip()
            base, frac = ts.split(".")
            t = datetime.strptime(base, "%Y-%m-%d %H:%M:%S").timestamp() + int(frac) / 10 ** len(frac)
            times.append(t)
            prompts.append(int(row["ContextTokens"]))
            outputs.append(int(row["GeneratedTokens"]))
    n = len(times)
    span = times[-1] - times[0]
    gaps = [b - a for a, b in zip(times, times[1:])]
    gmean, gstd = moments(gaps)
    cv = gstd / gmean
    print(f"file: {path}")
    print(f"requests={n} span_s={span:.6f} arrival_rate_per_s={(n - 1) / span:.6f}")
    print(f"interarrival: mean_s={gmean:.6f} cv={cv:.6f} gamma_shape=1/cv^2={1 / cv ** 2:.6f}")
    describe("prompt_tokens", prompts)
    describe("output_tokens", outputs)


if __name__ == "__main__":
    main()
