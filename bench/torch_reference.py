#!/usr/bin/python3
"""The xgrad_bench training step in PyTorch, for side-by-side ratios (bench/compare.sh).

Same model as xgrad's nn::AttentionModel (token + learned positional embeddings, one pre-LN block: LayerNorm,
multi-head causal attention with 1/sqrt(d_k) scaling and bias-free projections, LayerNorm, MLP with tanh-GELU and
d_ff = 4 d_model; final LayerNorm; linear readout with bias), the same init scheme (embeddings N(0, 1), Linear
weights LeCun normal N(0, 1/fan_in), biases 0, LayerNorm weight 1 and bias 0), the same optimizer (AdamW, lr 1e-3,
betas (0.9, 0.999), eps 1e-8, weight decay 0.01) and the same timed region: forward, cross-entropy, zero_grad
(set_to_none, as xgrad drops gradients), backward, optimizer step, loss.item(). Drawing the batch is not timed.

Optional: needs Debian's python3-torch (`apt-get install -y python3-torch`) and /usr/bin/python3. xgrad never
needs it. Output matches xgrad_bench's (a table, or --csv lines).
"""
import argparse
import math
import os
import statistics
import time

PROCESS_START = time.perf_counter()  # as early as possible: toy mode reports the process's time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: d_model, n_heads, batch, seq_len, warmup, steps (as bench/bench_configs.cpp)
CONFIGS = {
    "S": (64, 1, 32, 16, 20, 400),
    "M": (128, 4, 64, 32, 10, 100),
    "L": (512, 8, 32, 64, 3, 20),
}
VOCAB = 32


def lecun_linear(fan_in, fan_out, bias):
    layer = nn.Linear(fan_in, fan_out, bias=bias)
    with torch.no_grad():
        layer.weight.normal_(0.0, 1.0 / math.sqrt(fan_in))
        if bias:
            layer.bias.zero_()
    return layer


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (lecun_linear(d_model, d_model, False) for _ in range(4))
        self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, _ = x.shape

        def heads(t):
            return t.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # [B, H, T, d_k]

        q, k, v = heads(self.w_q(x)), heads(self.w_k(x)), heads(self.w_v(x))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_k))
        probs = torch.softmax(scores.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(B, T, self.n_heads * self.d_k)
        return self.w_o(out)


class Block(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, max_seq_len)
        self.fc_in = lecun_linear(d_model, 4 * d_model, True)
        self.fc_out = lecun_linear(4 * d_model, d_model, True)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_out(F.gelu(self.fc_in(self.ln_2(x)), approximate="tanh"))


class AttentionModel(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(VOCAB, d_model), nn.Embedding(max_seq_len, d_model)  # N(0, 1)
        self.block = Block(d_model, n_heads, max_seq_len)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = lecun_linear(d_model, VOCAB, True)
        self.register_buffer("positions", torch.arange(max_seq_len))

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos_emb(self.positions[: tokens.shape[1]])
        return self.head(self.ln_f(self.block(x)))


def time_config(name, steps, warmup):
    d_model, n_heads, batch, seq_len, default_warmup, default_steps = CONFIGS[name]
    steps = steps or default_steps
    warmup = default_warmup if warmup is None else warmup
    reset_peak_rss()
    torch.manual_seed(1)
    model = AttentionModel(d_model, n_heads, seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    times, cpu_times = [], []
    for i in range(warmup + steps):
        tokens = torch.randint(0, VOCAB, (batch, seq_len))
        targets = torch.randint(0, VOCAB, (batch, seq_len))
        c0, t0 = time.thread_time(), time.perf_counter()
        logits = model(tokens)
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
            cpu_times.append((time.thread_time() - c0) * 1e3)
    flops = step_flops(d_model, n_heads, batch, seq_len)
    med = statistics.median(times)
    return dict(steps=steps, median_ms=med, min_ms=min(times), cpu_ms=statistics.median(cpu_times),
                gflops=flops / (med * 1e6), peak_rss_mib=peak_rss_mib(), d_model=d_model, n_heads=n_heads, batch=batch,
                seq_len=seq_len)


def step_flops(d_model, n_heads, batch, seq_len):
    """The GEMM FLOPs of one step, counted as bench/bench_configs.h documents (3x the forward products)."""
    rows, d_k, d_ff = batch * seq_len, d_model // n_heads, 4 * d_model
    forward = 4 * 2 * rows * d_model * d_model  # q, k, v, output projections
    forward += 2 * 2 * batch * n_heads * seq_len * seq_len * d_k  # q k^T, probs v
    forward += 2 * 2 * rows * d_model * d_ff  # MLP
    forward += 2 * rows * d_model * VOCAB  # readout
    return 3.0 * forward


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mib():
    return status_mib("VmHWM")


def blas_core():
    """The OpenBLAS core of the BLAS torch calls (Debian's torch calls sgemm_ of libblas.so.3, which the alternatives
    system points at OpenBLAS), or "not OpenBLAS"."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "not OpenBLAS"


# ---- toy mode (bench/toy_sweep.sh): the model and task of a toy sweep, as `xgrad train` runs them ----

class ToyModel(nn.Module):
    """xgrad's AttentionModel as `xgrad train --task kv_recall --kv-encoding sum --n-heads 1 --d-k D --mlp false
    --attn-out-proj false` builds it: each position's input is the sum of its two token embeddings plus its position's;
    one pre-LN block x + softmax(q k^T / sqrt(d_k), causal) v (optionally W_o, optionally the MLP); final LayerNorm;
    the readout (with bias) at the target rows only."""

    def __init__(self, vocab, d_model, seq_len, out_proj, mlp, layer_norm, queries="all"):
        super().__init__()
        self.queries = queries
        self.tok_emb, self.pos_emb = nn.Embedding(vocab, d_model), nn.Embedding(seq_len, d_model)  # N(0, 1)
        self.ln_1 = nn.LayerNorm(d_model) if layer_norm else nn.Identity()
        self.ln_2 = nn.LayerNorm(d_model) if layer_norm and mlp else nn.Identity()
        self.ln_f = nn.LayerNorm(d_model) if layer_norm else nn.Identity()
        self.w_q, self.w_k, self.w_v = (lecun_linear(d_model, d_model, False) for _ in range(3))
        self.w_o = lecun_linear(d_model, d_model, False) if out_proj else None
        self.mlp = nn.Sequential(lecun_linear(d_model, 4 * d_model, True), nn.GELU(approximate="tanh"),
                                 lecun_linear(4 * d_model, d_model, True)) if mlp else None
        self.head = lecun_linear(d_model, vocab, True)
        self.scale = 1.0 / math.sqrt(d_model)
        self.register_buffer("mask", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), 1))
        self.register_buffer("positions", torch.arange(seq_len))

    def forward(self, tokens, target_pos):
        """tokens [B, T, 2] -> logits [B, vocab] at position target_pos of every sequence."""
        x = self.tok_emb(tokens).sum(2) + self.pos_emb(self.positions)
        h = self.ln_1(x)
        if self.queries == "target":  # as xgrad's last block: the query, W_o, residual and MLP at the target only
            t = slice(target_pos, target_pos + 1)
            scores = (self.w_q(h[:, t]) @ self.w_k(h).transpose(-2, -1)) * self.scale  # [B, 1, T]
            a = torch.softmax(scores.masked_fill(self.mask[t], float("-inf")), dim=-1) @ self.w_v(h)
            x = x[:, t] + (self.w_o(a) if self.w_o is not None else a)
            if self.mlp is not None:
                x = x + self.mlp(self.ln_2(x))
            return self.head(self.ln_f(x[:, 0]))
        scores = (self.w_q(h) @ self.w_k(h).transpose(-2, -1)) * self.scale
        a = torch.softmax(scores.masked_fill(self.mask, float("-inf")), dim=-1) @ self.w_v(h)
        x = x + (self.w_o(a) if self.w_o is not None else a)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_2(x))
        return self.head(self.ln_f(x[:, target_pos]))


def kv_recall_sum_batch(gen, batch, n_keys, n_values, n_pairs):
    """kv_recall's `sum` encoding (data/kv_recall.cpp): n_pairs distinct keys each with a uniform value, then the
    query (a key of the sequence + the query marker); tokens [B, n_pairs + 1, 2], targets [B]."""
    keys = torch.rand(batch, n_keys, generator=gen).argsort(1)[:, :n_pairs]
    values = torch.randint(0, n_values, (batch, n_pairs), generator=gen)
    query = torch.randint(0, n_pairs, (batch,), generator=gen)
    rows = torch.arange(batch)
    tokens = torch.empty(batch, n_pairs + 1, 2, dtype=torch.long)
    tokens[:, :n_pairs, 0] = n_values + keys
    tokens[:, :n_pairs, 1] = values
    tokens[:, n_pairs, 0] = n_values + keys[rows, query]
    tokens[:, n_pairs, 1] = n_values + n_keys
    return tokens, values[rows, query]


def toy_run(args):
    """Trains the toy model for args.steps steps as a sweep's run would and prints one CSV line:
    toy,d_k,optimizer,steps,train_seconds,steps_per_s,final_loss,process_seconds (process_seconds from interpreter
    start, so it includes importing torch)."""
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(1000 + args.seed)
    n_keys = n_values = n_pairs = 8
    vocab, seq_len = n_values + n_keys + 1, n_pairs + 1
    model = ToyModel(vocab, args.d_k, seq_len, args.attn_out_proj, args.mlp, args.layer_norm, args.queries)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    params = [p for p in model.parameters()]
    log = open(os.devnull, "w") if not args.metrics else open(args.metrics, "w")
    log.write("step,loss,grad_norm\n")
    t0 = time.perf_counter()
    for step in range(args.steps):
        tokens, targets = kv_recall_sum_batch(gen, args.batch, n_keys, n_values, n_pairs)
        loss = F.cross_entropy(model(tokens, n_pairs), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # The global gradient norm and the loss of every step, as xgrad's metrics.csv records them.
        grad_norm = torch.norm(torch.stack([torch.norm(p.grad) for p in params]))
        opt.step()
        log.write(f"{step + 1},{loss.item():.9g},{grad_norm.item():.9g}\n")
        log.flush()
    seconds = time.perf_counter() - t0
    print(f"toy,{args.d_k},{args.optimizer},{args.steps},{seconds:.4f},{args.steps / seconds:.2f},{loss.item():.6g},"
          f"{time.perf_counter() - PROCESS_START:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="S,M,L")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", action="store_true")
    parser.add_argument("--toy", action="store_true", help="train the toy sweep's model instead (bench/toy_sweep.sh)")
    parser.add_argument("--d-k", type=int, default=64, help="toy: d_model = d_k")
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="adamw", help="toy")
    parser.add_argument("--lr", type=float, default=1e-3, help="toy")
    parser.add_argument("--batch", type=int, default=64, help="toy")
    parser.add_argument("--seed", type=int, default=0, help="toy")
    parser.add_argument("--attn-out-proj", action="store_true", help="toy: with W_o")
    parser.add_argument("--mlp", action="store_true", help="toy: with the MLP")
    parser.add_argument("--no-layer-norm", dest="layer_norm", action="store_false", help="toy: without LayerNorm")
    parser.add_argument("--metrics", default="", help="toy: write step,loss,grad_norm per step here")
    parser.add_argument("--queries", choices=["all", "target"], default="all",
                        help="toy: queries (and what follows them) at every position, or only at the target as xgrad's "
                             "trainer computes them")
    args = parser.parse_args()
    if args.toy:
        torch.set_num_threads(args.threads)
        torch.set_flush_denormal(True)
        args.steps = args.steps or 3000
        toy_run(args)
        return
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as xgrad's training (set_flush_denormals)
    core = blas_core()
    if not args.csv:
        print(f"PyTorch {torch.__version__}, OpenBLAS core {core}, {torch.get_num_threads()} thread(s), "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'cfg':<3} {'d_model':>7} {'n_heads':>7} {'batch':>6} {'seq':>5} {'steps':>6} {'median_ms':>10} "
              f"{'min_ms':>10} {'cpu_ms':>10} {'GFLOP/s':>9} {'peak_rss_MiB':>12}")
    for name in args.config.split(","):
        r = time_config(name, args.steps, args.warmup)
        if args.csv:
            print(f"step,{name},{r['median_ms']:.4f},{r['min_ms']:.4f},{r['cpu_ms']:.4f},{r['gflops']:.3f},"
                  f"{r['peak_rss_mib']:.1f},{core},{torch.get_num_threads()}", flush=True)
        else:
            print(f"{name:<3} {r['d_model']:>7} {r['n_heads']:>7} {r['batch']:>6} {r['seq_len']:>5} {r['steps']:>6} "
                  f"{r['median_ms']:>10.3f} {r['min_ms']:>10.3f} {r['cpu_ms']:>10.3f} {r['gflops']:>9.2f} "
                  f"{r['peak_rss_mib']:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
