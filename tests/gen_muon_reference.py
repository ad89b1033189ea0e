#!/usr/bin/env python3
"""tests/gen_muon_reference.py - writes tests/data/muon_reference.txt: trajectories of
torch.optim.Muon (a 2-D weight W) together with torch.optim.AdamW (a bias b), the split the
Muon authors use, for tests/test_muon.c. PyTorch is needed only here, to make the file:

    python3 tests/gen_muon_reference.py > tests/data/muon_reference.txt

Each case trains one "model" (W [rows, cols], b [rows]) for `steps` steps, fp32 throughout.
Nothing random is stored: the initial values and the gradients come from a 64-bit hash
(splitmix64's finalizer) of (case, array, step, index) as (h % 20001 - 10000) / 2^k, exact in
fp32, which tests/test_muon.c computes the same way. Written per case:
    W_torch   W after the steps with torch.optim.Muon as shipped (its Newton-Schulz runs in
              bfloat16);
    W_f64ns   the same run with the Newton-Schulz iteration in float64 (the rest unchanged),
              the reference for zero.h, whose iteration runs in fp32;
    b         b after the steps with torch.optim.AdamW (foreach=False).
Values are %.9g, so they read back as the same fp32."""
import math
import sys

import torch
import torch.optim._muon as muon_mod

M64 = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def values(case, arr, step, n, shift):
    """arr 0: W, 1: b; step 0: the initial values, t: the gradient of step t"""
    out = []
    for i in range(n):
        h = mix((case << 48) ^ (arr << 40) ^ (step << 24) ^ i)
        out.append(((h % 20001) - 10000) / float(1 << shift))
    return out


CASES = [
    # rows, cols, steps, Muon: lr, weight_decay, momentum, nesterov, adjust_lr_fn; AdamW: lr, betas, eps, wd
    dict(rows=48, cols=192, steps=20, lr=0.02, wd=0.1, mu=0.95, nesterov=True, adjust="original",
         alr=1e-3, b1=0.9, b2=0.999, eps=1e-8, awd=0.01),
    dict(rows=192, cols=48, steps=20, lr=0.01, wd=0.0, mu=0.9, nesterov=False, adjust="match_rms_adamw",
         alr=3e-3, b1=0.8, b2=0.95, eps=1e-6, awd=0.1),
    dict(rows=37, cols=53, steps=20, lr=1e-3, wd=0.1, mu=0.95, nesterov=True, adjust="original",
         alr=1e-3, b1=0.9, b2=0.999, eps=1e-8, awd=0.01),
]


def ns_f64(grad, ns_coefficients, ns_steps, eps):
    """torch's iteration, step for step, in float64"""
    a, b, c = ns_coefficients
    x = grad.to(dtype=torch.float64, copy=True)
    if grad.size(0) > grad.size(1):
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        upd = b * gram + c * (gram @ gram)
        x = a * x + upd @ x
    if grad.size(0) > grad.size(1):
        x = x.T
    return x.to(grad.dtype)


def run(ci, c, f64):
    rows, cols, steps = c["rows"], c["cols"], c["steps"]
    w = torch.tensor(values(ci, 0, 0, rows * cols, 14), dtype=torch.float32).reshape(rows, cols)
    b = torch.tensor(values(ci, 1, 0, rows, 14), dtype=torch.float32)
    w = torch.nn.Parameter(w)
    b = torch.nn.Parameter(b)
    mo = torch.optim.Muon([w], lr=c["lr"], weight_decay=c["wd"], momentum=c["mu"], nesterov=c["nesterov"],
                          adjust_lr_fn=c["adjust"])
    ao = torch.optim.AdamW([b], lr=c["alr"], betas=(c["b1"], c["b2"]), eps=c["eps"], weight_decay=c["awd"],
                           foreach=False)
    saved = muon_mod._zeropower_via_newtonschulz
    if f64:
        muon_mod._zeropower_via_newtonschulz = ns_f64
    try:
        for t in range(1, steps + 1):
            w.grad = torch.tensor(values(ci, 0, t, rows * cols, 16), dtype=torch.float32).reshape(rows, cols)
            b.grad = torch.tensor(values(ci, 1, t, rows, 16), dtype=torch.float32)
            mo.step()
            ao.step()
    finally:
        muon_mod._zeropower_via_newtonschulz = saved
    return w.detach().reshape(-1).tolist(), b.detach().tolist()


def line(key, xs):
    return key + " " + " ".join("%.9g" % x for x in xs)


def main():
    torch.set_num_threads(1)
    out = sys.stdout
    out.write("# muon reference: torch %s (torch.optim.Muon + torch.optim.AdamW), written by tests/gen_muon_reference.py\n"
              % torch.__version__)
    out.write("# 'case' key=value..., then W_torch, W_f64ns (rows*cols values, row-major) and b (rows values)\n")
    for ci, c in enumerate(CASES):
        out.write("case rows=%d cols=%d steps=%d lr=%r weight_decay=%r momentum=%r nesterov=%d adjust=%s ns_steps=5 "
                  "eps=1e-07 adamw_lr=%r adamw_beta1=%r adamw_beta2=%r adamw_eps=%r adamw_weight_decay=%r\n"
                  % (c["rows"], c["cols"], c["steps"], c["lr"], c["wd"], c["mu"], int(c["nesterov"]), c["adjust"],
                     c["alr"], c["b1"], c["b2"], c["eps"], c["awd"]))
        wt, bt = run(ci, c, False)
        wf, bf = run(ci, c, True)
        if bt != bf or any(math.isnan(x) for x in wt + wf):
            raise SystemExit("the AdamW param differs between the two runs, or a NaN")
        out.write(line("W_torch", wt) + "\n")
        out.write(line("W_f64ns", wf) + "\n")
        out.write(line("b", bt) + "\n")


if __name__ == "__main__":
    main()
