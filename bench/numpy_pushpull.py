#!/usr/bin/env python3
"""Push-Pull on the papers' synthetic nonconvex logistic problem, written the way such studies usually are
(NumPy, after pkumelon/PushPull synthetic_experiments): the same problem, graph, step and metric as
`orrery gossip run --algo push-pull --topology exponential:16 --problem logistic-nonconvex`.

Per iteration: every node draws its minibatch by sorting a random permutation of its data (argsort of
uniforms, as the reference code does; --sampler choice uses Generator.choice without replacement instead,
a faster NumPy idiom), computes its gradient with einsum, x <- A x - a y, y <- B y + g+ - g, and (unless
--eval-every says otherwise) the full-data gradient norm at the mean of the nodes: the per-iteration
||grad f(xbar)|| curve the papers plot, so the like-for-like orrery run is `--eval-every 1`.
Prints the CPU seconds per iteration (median of --repeats timed blocks; run with OPENBLAS_NUM_THREADS=1
so that both sides use one core), for the comparison in
docs/decentral_algorithms.md. Data generation is vectorized and not timed.

usage: python3 bench/numpy_pushpull.py [--nodes 16] [--iters 30] [--eval-every 1] [--repeats 3] [--sampler argsort]
"""
import argparse
import time

import numpy as np


def exponential_matrices(n):
    # Static exponential graph i -> i + 2^k mod n; pull A(i, j) = 1/(1 + indeg i), push B(i, j) = 1/(1 + outdeg j).
    adj = np.eye(n)
    k = 1
    while k < n:
        for i in range(n):
            adj[(i + k) % n, i] = 1.0  # edge i -> i + k: row = receiver
        k *= 2
    a = adj / adj.sum(axis=1, keepdims=True)
    b = adj / adj.sum(axis=0, keepdims=True)
    return a, b


def grad(x, h, y, rho, batch, rng, sampler="argsort"):
    n, m, d = h.shape
    if batch is None:
        hb, yb = h, y
    else:
        if sampler == "argsort":
            idx = rng.random((n, m)).argsort(axis=1)[:, :batch]
        else:
            idx = np.stack([rng.choice(m, batch, replace=False) for _ in range(n)])
        node = np.arange(n)[:, None]
        hb, yb = h[node, idx, :], y[node, idx]
    z = np.einsum("nbd,nd->nb", hb, x)
    e = np.exp(np.minimum(yb * z, 700.0))
    g1 = -np.einsum("nbd,nb->nd", hb, yb / (1.0 + e)) / hb.shape[1]
    g2 = 2.0 * x / (1.0 + x * x) ** 2
    return g1 + rho * g2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--samples", type=int, default=1_440_000)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--batch", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--rho", type=float, default=0.01)
    p.add_argument("--eval-every", type=int, default=1, help="0: never")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sampler", choices=["argsort", "choice"], default="argsort",
                   help="minibatch draw: argsort of uniforms (the reference code) or Generator.choice")
    a = p.parse_args()

    rng = np.random.default_rng(42)
    n, d = a.nodes, a.dim
    x_opt = rng.normal(size=d)
    h = rng.normal(size=(a.samples, d))
    y = np.where(rng.random(a.samples) < 1.0 / (1.0 + np.exp(-h @ x_opt)), 1.0, -1.0)
    m = a.samples // n
    h = h[: m * n].reshape(n, m, d)
    y = y[: m * n].reshape(n, m)
    A, B = exponential_matrices(n)

    per_iter = []
    norm = float("nan")
    for _ in range(a.repeats):
        x = 0.01 * rng.normal(size=(n, d))
        g = grad(x, h, y, a.rho, a.batch, rng, a.sampler)
        yt = g.copy()
        t0 = time.process_time()  # CPU time: robust to other processes on a shared machine
        for k in range(a.iters):
            x = A @ x - a.lr * yt
            g_new = grad(x, h, y, a.rho, a.batch, rng, a.sampler)
            yt = B @ yt + g_new - g
            g = g_new
            if a.eval_every and (k + 1) % a.eval_every == 0:
                xbar = np.broadcast_to(x.mean(axis=0), (n, d))
                norm = float(np.linalg.norm(grad(xbar, h, y, a.rho, None, rng).mean(axis=0)))
        per_iter.append((time.process_time() - t0) / a.iters)
    per_iter.sort()
    print(f"numpy push-pull: n={n} d={d} samples={a.samples} batch={a.batch} eval_every={a.eval_every} sampler={a.sampler}: "
          f"median {per_iter[len(per_iter) // 2] * 1e3:.2f} ms/iteration over {a.repeats} x {a.iters} iterations "
          f"(last ||grad f(xbar)|| {norm:.3e})")


if __name__ == "__main__":
    main()
