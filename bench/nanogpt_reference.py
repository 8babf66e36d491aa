#!/usr/bin/python3
"""nanoGPT's CPU setup in PyTorch, trained on the very batches `xgrad train --task char_lm` draws (bench/nanogpt_cpu.sh).

The model is xgrad's nn::AttentionModel at --n-layers blocks: token + learned positional embeddings, pre-LN blocks
(LayerNorm eps 1e-5, causal multi-head attention with 1/sqrt(d_k) and bias-free projections, LayerNorm, MLP with
tanh-GELU and d_ff = 4 d_model), final LayerNorm, readout. --tie-word-embeddings reads out with the token embedding
(logits = x E^T); --bias false drops every bias (MLP, readout, LayerNorm). Init as xgrad's: embeddings N(0,
emb_init_std^2), every Linear weight LeCun normal N(0, 1/fan_in) (q, k, v are one [d_model, 3 d_model] Linear as
nanoGPT's c_attn: each third has xgrad's distribution), biases 0, LayerNorm weight 1 and bias 0. The weights are drawn
by torch's generator (the same distribution as xgrad's, not the same numbers).

The data are xgrad's char_lm batches exactly: the bytes of --text, the first size - floor(size / 10) train, the rest
held out; batch `index` of a split is batch_size windows of seq_len + 1 bytes starting at Generator(data_seed,
stream, index).uniform(n_starts) (autograd/random.h and data/char_lm.cpp, ported below). Training step s uses train
batch s; after the update of step s, when s % eval_every == 0 or s is the last step, the eval loss is the mean over
eval batches s * eval_batches + i, i < eval_batches (train/step_metrics.cpp).

Optimizer and schedule as xgrad's: AdamW (eps 1e-8; decoupled weight decay on every parameter, or on the 2-D ones
only with --weight-decay-params matrices, as nanoGPT's groups), torch's clip_grad_norm_, the learning rate of step s
from nn/lr_schedule.cpp's cosine_lr (linear warmup lr (s + 1) / warmup, then cosine to min_lr over the rest).

Timed per step: drawing the batch's tensors from the pre-drawn window starts (xgrad's step draws them too, in C++;
Python's port of the generator is not timed), forward, cross-entropy, zero_grad(set_to_none), backward,
clip_grad_norm_, setting the learning rate, optimizer step and loss.item(); evaluation is not. Writes metrics.csv
(step,loss,lr,grad_norm,step_ms,eval_loss; step 0-based, as xgrad's) into --out.

Optional: needs Debian's python3-torch and /usr/bin/python3; xgrad never needs it.
"""
import argparse
import json
import math
import os
import sys
import time

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
CHAR_LM_STREAM = 0x636C  # "cl", data/char_lm.cpp
EVAL_STREAM_BIT = 0x8000000000000000  # data/task.h split_stream: eval = train stream ^ this


def _mix(z):
    """SplitMix64's output function of an already advanced state z."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Generator:
    """xgrad's Generator (autograd/random.h): xoshiro256** seeded through SplitMix64 from (seed, stream, index)."""

    def __init__(self, seed, stream=0, index=0):
        x = _mix((seed + GOLDEN) & MASK64) ^ stream
        x = _mix((x + GOLDEN) & MASK64) ^ index
        self.s = [_mix((x + (i + 1) * GOLDEN) & MASK64) for i in range(4)]

    def next_u64(self):
        s = self.s
        x = (s[1] * 5) & MASK64
        result = ((((x << 7) | (x >> 57)) & MASK64) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = ((s[3] << 45) | (s[3] >> 19)) & MASK64
        return result

    def uniform(self, n):
        """Uniform integer in [0, n), exactly uniform (rejection sampling), as xgrad's."""
        limit = MASK64 - (MASK64 % n)
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def window_starts(n_bytes, seq_len, data_seed, index, batch_size, split):
    """The byte offsets of char_lm batch `index` of `split` ("train" or "eval"): [batch_size] ints."""
    eval_begin = n_bytes - n_bytes // 10
    begin, end = (0, eval_begin) if split == "train" else (eval_begin, n_bytes)
    stream = CHAR_LM_STREAM if split == "train" else CHAR_LM_STREAM ^ EVAL_STREAM_BIT
    rng = Generator(data_seed, stream, index)
    n_starts = end - begin - seq_len
    return [begin + rng.uniform(n_starts) for _ in range(batch_size)]


def xgrad_cosine_lr(lr, min_lr, step, warmup_steps, steps):
    """nn/lr_schedule.cpp cosine_lr, step 0-based."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    t = step - warmup_steps
    span = max(steps - min(steps, warmup_steps), 1)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * min(t, span) / span))


def build_model(args, vocab=256):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def lecun_(weight, fan_in):
        with torch.no_grad():
            weight.normal_(0.0, 1.0 / math.sqrt(fan_in))
        return weight

    def linear(fan_in, fan_out, bias):
        layer = nn.Linear(fan_in, fan_out, bias=bias)
        lecun_(layer.weight, fan_in)
        if bias:
            nn.init.zeros_(layer.bias)
        return layer

    class LayerNorm(nn.Module):
        """LayerNorm with an optional bias (torch 1.13's nn.LayerNorm always has one)."""

        def __init__(self, d, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.bias = nn.Parameter(torch.zeros(d)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class Block(nn.Module):
        def __init__(self, d, n_heads, bias):
            super().__init__()
            self.n_heads, self.d_k = n_heads, d // n_heads
            self.ln_1, self.ln_2 = LayerNorm(d, bias), LayerNorm(d, bias)
            self.c_attn = linear(d, 3 * d, False)  # w_q, w_k, w_v side by side, each LeCun N(0, 1/d)
            self.w_o = linear(d, d, False)
            self.fc_in, self.fc_out = linear(d, 4 * d, bias), linear(4 * d, d, bias)
            self.register_buffer("mask", torch.triu(torch.ones(args.seq_len, args.seq_len, dtype=torch.bool), 1))

        def attention(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_heads, self.d_k).transpose(1, 2) for t in (q, k, v))  # [B, H, T, d_k]
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_k))
            probs = torch.softmax(scores.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
            return self.w_o((probs @ v).transpose(1, 2).reshape(B, T, C))

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            return x + self.fc_out(F.gelu(self.fc_in(self.ln_2(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            d = args.d_model
            self.tok_emb, self.pos_emb = nn.Embedding(vocab, d), nn.Embedding(args.seq_len, d)
            for e in (self.tok_emb, self.pos_emb):
                nn.init.normal_(e.weight, 0.0, args.emb_init_std)
            self.blocks = nn.ModuleList(Block(d, args.n_heads, args.bias) for _ in range(args.n_layers))
            self.ln_f = LayerNorm(d, args.bias)
            self.head = None if args.tie_word_embeddings else lecun_(nn.Parameter(torch.empty(vocab, d)), d)
            self.head_bias = nn.Parameter(torch.zeros(vocab)) if args.bias else None
            self.register_buffer("positions", torch.arange(args.seq_len))

        def forward(self, tokens, targets):
            x = self.tok_emb(tokens) + self.pos_emb(self.positions[: tokens.shape[1]])
            for block in self.blocks:
                x = block(x)
            weight = self.tok_emb.weight if self.head is None else self.head
            logits = F.linear(self.ln_f(x), weight, self.head_bias)
            return F.cross_entropy(logits.view(-1, vocab), targets.reshape(-1))

    return Model()


def make_optimizer(model, args):
    import torch
    params = [p for p in model.parameters() if p.requires_grad]
    if args.weight_decay_params == "matrices":  # nanoGPT's groups: decay the 2-D parameters only
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": params, "weight_decay": args.weight_decay}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)


def train(args):
    import torch
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as xgrad's training (set_flush_denormals)
    torch.manual_seed(args.seed)
    with open(args.text, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    n, T, B = data.numel(), args.seq_len, args.batch_size
    offsets = torch.arange(T + 1)

    def windows(starts):
        w = data[torch.tensor(starts).unsqueeze(1) + offsets].long()  # [B, T + 1]
        return w[:, :T], w[:, 1:]

    train_starts = [window_starts(n, T, args.data_seed, s, B, "train") for s in range(args.steps)]
    model = build_model(args)
    opt = make_optimizer(model, args)
    params = [p for p in model.parameters()]
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "metrics.csv"), "w")
    log.write("step,loss,lr,grad_norm,step_ms,eval_loss\n")
    for step in range(args.steps):
        t0 = time.perf_counter()
        inputs, targets = windows(train_starts[step])
        loss = model(inputs, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, args.clip_grad_norm)
        lr = xgrad_cosine_lr(args.lr, args.min_lr, step, args.warmup_steps, args.steps)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        loss_value = loss.item()
        step_ms = (time.perf_counter() - t0) * 1e3
        eval_loss = ""
        if args.eval_every > 0 and (step % args.eval_every == 0 or step + 1 == args.steps):
            eval_loss = f"{evaluate(model, windows, n, args, step):.9g}"
        log.write(f"{step},{loss_value:.9g},{lr:.9g},{grad_norm.item():.9g},{step_ms:.6f},{eval_loss}\n")
    log.close()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_reference import blas_core
    with open(os.path.join(args.out, "environment.json"), "w") as f:
        json.dump({"torch": torch.__version__, "openblas_core": blas_core(), "threads": torch.get_num_threads()}, f)
        f.write("\n")


def evaluate(model, windows, n_bytes, args, step):
    import torch
    total = 0.0
    with torch.no_grad():
        for i in range(args.eval_batches):
            starts = window_starts(n_bytes, args.seq_len, args.data_seed, step * args.eval_batches + i,
                                   args.batch_size, "eval")
            total += model(*windows(starts)).item()
    return total / args.eval_batches


def boolean(text):
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")
    return text == "true"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", required=True)
    p.add_argument("--out", required=True, help="directory to write metrics.csv into")
    for name, default in (("seq-len", 64), ("n-layers", 4), ("n-heads", 4), ("d-model", 128), ("batch-size", 12),
                          ("steps", 2000), ("warmup-steps", 100), ("eval-every", 500), ("eval-batches", 50),
                          ("threads", 1), ("seed", 0)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--data-seed", type=int, default=None, help="default: --seed, as xgrad's")
    for name, default in (("lr", 1e-3), ("min-lr", 1e-4), ("beta1", 0.9), ("beta2", 0.99), ("eps", 1e-8),
                          ("weight-decay", 0.1), ("clip-grad-norm", 1.0), ("emb-init-std", 0.02)):
        p.add_argument("--" + name, type=float, default=default)
    p.add_argument("--tie-word-embeddings", type=boolean, default=True)
    p.add_argument("--bias", type=boolean, default=False)
    p.add_argument("--weight-decay-params", choices=["all", "matrices"], default="matrices")
    args = p.parse_args(argv)
    if args.data_seed is None:
        args.data_seed = args.seed
    return args


# ---- summarize: bench/nanogpt_cpu.sh's table from its runs' metrics.csv files (needs no torch) ----

SPEED_TARGETS = {1: 0.5, 2: 0.45}  # xgrad's ms/iter at most this fraction of PyTorch's, per thread count
FLOOR_TARGET = 1.15  # xgrad's one-thread ms/iter at most this multiple of its sgemm floor
SCALING_TARGET = 1.8  # xgrad's one-thread ms/iter over its two-thread one at least this
LOSS_TARGET = 0.02  # xgrad's final held-out loss within this fraction of PyTorch's mean


def counted_gflop(path):
    """sgemm GFLOP per counted step from an XGRAD_SGEMM_COUNT file (steps,trans_a,trans_b,m,n,k,calls)."""
    import csv
    with open(path) as f:
        rows = list(csv.DictReader(f))
    steps = int(rows[0]["steps"]) if rows else 0
    total = sum(2.0 * int(r["m"]) * int(r["n"]) * int(r["k"]) * int(r["calls"]) for r in rows)
    return total / steps / 1e9 if steps else float("nan")


def floors(directory):
    """{threads: [(one-thread floor ms per step, its GFLOP/s)]} from floor.csv: THREADS,SEED,sgemm,counted,total_ms,
    total_cpu_ms,gflops,cpu_gflops,peak_gflops,core,blas_threads (xgrad_bench sgemm --counts after each xgrad run)."""
    out = {}
    with open(os.path.join(directory, "floor.csv")) as f:
        for line in f:
            cells = line.strip().split(",")
            out.setdefault(int(cells[0]), []).append((float(cells[4]), float(cells[6])))
    return out


def read_run(directory, iters):
    """(ms/iter, {step: eval_loss}, wall seconds) of one run: ms/iter is the mean step_ms over steps 1 .. iters - 2
    (step 0 pays the first allocations, and xgrad's first and last steps also record its statistics)."""
    import csv
    with open(os.path.join(directory, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != iters:
        raise SystemExit(f"nanogpt_cpu.sh: {directory}/metrics.csv has {len(rows)} rows, expected {iters}")
    times = [float(r["step_ms"]) for r in rows[1:-1]]
    evals = {int(r["step"]): float(r["eval_loss"]) for r in rows if r["eval_loss"] not in ("", "nan")}
    with open(os.path.join(directory, "wall_s")) as f:
        wall = float(f.read())
    return sum(times) / len(times), evals, wall


def spread(values):
    """(max - min) / median, in percent."""
    import statistics
    return 100.0 * (max(values) - min(values)) / statistics.median(values)


def summarize(argv):
    import statistics
    p = argparse.ArgumentParser(prog="nanogpt_reference.py summarize")
    p.add_argument("dir")
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--seeds", type=int, required=True)
    p.add_argument("--threads", required=True)
    args = p.parse_args(argv)
    e = args.iters // 4
    points = [(e, e), (2 * e, 2 * e), (args.iters - 1, args.iters)]  # (row step, label: updates done, rounded)
    threads_list = [int(t) for t in args.threads.split(",")]
    runs = {(engine, t): [read_run(os.path.join(args.dir, f"{engine}-t{t}-s{s}"), args.iters)
                          for s in range(args.seeds)] for engine in ("xgrad", "torch") for t in threads_list}
    print(f"ms/iter: each run's mean step time over steps 1..{args.iters - 2}, the median over {args.seeds} seed(s) "
          f"(spread = (max - min) / median); GFLOP: sgemm GFLOP per iteration, every call of xgrad's timed steps "
          f"counted (PyTorch's row: xgrad's count over PyTorch's time); floor: those GEMMs timed alone on one thread "
          f"right after each xgrad run (median), / threads; x floor = ms/iter / floor; val@N: held-out loss after "
          f"iteration N, mean over seeds ± their standard deviation [min, max]; wall: median run time including "
          f"start-up and evaluation")
    header = (f"{'engine':<6} {'threads':>7} {'ms/iter':>8} {'spread':>7} {'ratio':>6} {'target':>7} {'GFLOP':>6} "
              f"{'GFLOP/s':>7} {'floor':>6} {'x floor':>7} {'wall s':>7}")
    for _, label in points:
        header += f" {'val@' + str(label):>26}"
    print(header)
    medians, floor_ms = {}, {}
    gflop = statistics.median(counted_gflop(os.path.join(args.dir, f"xgrad-t{t}-s{s}.sgemm.csv"))
                              for t in threads_list for s in range(args.seeds))
    measured = floors(args.dir)
    for t in threads_list:
        floor_ms[t] = statistics.median(x[0] for x in measured[t]) / t
        for engine in ("xgrad", "torch"):
            r = runs[engine, t]
            ms = [x[0] for x in r]
            medians[engine, t] = statistics.median(ms)
            ratio = medians["xgrad", t] / medians["torch", t] if engine == "torch" else None
            line = f"{engine:<6} {t:>7} {medians[engine, t]:>8.2f} {spread(ms):>6.1f}% "
            line += f"{ratio:>6.3f} " if ratio else f"{'':>6} "
            line += f"{'<= ' + str(SPEED_TARGETS[t]) if ratio and t in SPEED_TARGETS else '':>7} "
            line += f"{gflop:>6.3f} {gflop * 1e3 / medians[engine, t]:>7.1f} {floor_ms[t]:>6.2f} "
            line += f"{medians[engine, t] / floor_ms[t]:>7.3f} "
            line += f"{statistics.median(x[2] for x in r):>7.1f}"
            for step, _ in points:
                losses = [x[1][step] for x in r]
                sd = statistics.stdev(losses) if len(losses) > 1 else 0.0
                line += f" {statistics.mean(losses):>7.4f} ± {sd:.4f} [{min(losses):.3f}, {max(losses):.3f}]"
            print(line)
    for t in threads_list:
        rates = [x[1] for x in measured[t]]
        print(f"sgemm floor measured after the {t}-thread xgrad runs: {statistics.median(rates):.1f} GFLOP/s on one "
              f"thread at the step's own shapes (runs: {', '.join(f'{r:.1f}' for r in rates)}) = "
              f"{floor_ms[t] * t:.2f} ms per iteration on one core")
    judge_floor(medians, floor_ms, threads_list)
    judge(runs, medians, threads_list, args.iters - 1)
    cores = {}
    for engine, environment in (("xgrad", "config.json"), ("torch", "environment.json")):
        with open(os.path.join(args.dir, f"{engine}-t{threads_list[0]}-s0", environment)) as f:
            e = json.load(f)
        cores[engine] = e["environment"]["openblas_core"] if engine == "xgrad" else e["openblas_core"]
    print(f"OpenBLAS core: xgrad {cores['xgrad']}, PyTorch {cores['torch']}")


def judge_floor(medians, floor_ms, threads_list):
    if 1 in threads_list:
        x = medians["xgrad", 1] / floor_ms[1]
        print(f"floor, 1 thread: xgrad {medians['xgrad', 1]:.2f} ms/iter = {x:.3f} x its floor {floor_ms[1]:.2f} "
              f"(target <= {FLOOR_TARGET}): {'met' if x <= FLOOR_TARGET else 'MISSED'}")
    if 1 in threads_list and 2 in threads_list:
        x = medians["xgrad", 1] / medians["xgrad", 2]
        print(f"two cores: xgrad's 2-thread step {x:.2f}x faster than its 1-thread step (target >= {SCALING_TARGET}): "
              f"{'met' if x >= SCALING_TARGET else 'MISSED'}")


def judge(runs, medians, threads_list, last):
    import statistics
    for t in threads_list:
        ratio = medians["xgrad", t] / medians["torch", t]
        if t in SPEED_TARGETS:
            verdict = "met" if ratio <= SPEED_TARGETS[t] else "MISSED"
            print(f"speed, {t} thread(s): xgrad {medians['xgrad', t]:.2f} ms/iter = {ratio:.3f} x PyTorch's "
                  f"{medians['torch', t]:.2f} (target <= {SPEED_TARGETS[t]}): {verdict}")
    for t in threads_list:
        x = [r[1][last] for r in runs["xgrad", t]]
        torch_losses = [r[1][last] for r in runs["torch", t]]
        mx, mt = statistics.mean(x), statistics.mean(torch_losses)
        worst = max(abs(v - mt) / mt for v in x)
        verdict = "met" if abs(mx - mt) / mt <= LOSS_TARGET else "MISSED"
        print(f"final val loss, {t} thread(s): xgrad mean {mx:.4f} (seeds {min(x):.4f}..{max(x):.4f}), PyTorch "
              f"mean {mt:.4f} (seeds {min(torch_losses):.4f}..{max(torch_losses):.4f}): xgrad's mean "
              f"{100 * (mx - mt) / mt:+.2f}% (target within {100 * LOSS_TARGET:.0f}%): {verdict}; "
              f"every xgrad seed within {100 * worst:.2f}%")


if __name__ == "__main__":
    if sys.argv[1:2] == ["summarize"]:
        summarize(sys.argv[2:])
    else:
        train(parse_args(sys.argv[1:]))
