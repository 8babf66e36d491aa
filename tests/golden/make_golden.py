#!/usr/bin/python3
"""Writes the golden fixtures that tests/test_golden.cpp checks xgrad against (PyTorch as the reference).

How to run (by hand; never in CI, and the C++ test never needs Python):

    apt-get install -y python3-torch python3-numpy     # Debian 12: torch 1.13, numpy 1.24
    /usr/bin/python3 tests/golden/make_golden.py       # from the repository root

Use Debian's /usr/bin/python3: a pyenv or venv python on PATH will not see the Debian packages.

When to run: only when a fixture must change, i.e. when a case is added here or the reference model's
architecture changes (parameter names, LayerNorm placement, scale mode, ...). Then commit the regenerated
fixtures with the change. The output is deterministic (inputs come from numpy's PCG64 seeded per case, the
reference runs in float64 on CPU), so re-running on an unchanged script should leave `git status` clean.

What it writes, under tests/golden/fixtures/:

  ops/<case>/<input>.npy     inputs: float32, or int64 for indices and class targets
  ops/<case>/out.npy         the op's output
  ops/<case>/W.npy           fixed random weights of the output's shape
  ops/<case>/grad_<input>.npy  d sum(out * W) / d input, for every float input
  model/tokens.npy, model/targets.npy (int64, -1 = ignored)
  model/param_names.txt      xgrad's named_parameters() order, one dotted name a line
  model/params/<name>.npy    initial parameters in xgrad's layout (Linear weight [in, out])
  model/logits.npy, model/loss.npy, model/grads/<name>.npy
  model/adamw_losses.npy     the loss before each of 10 AdamW steps on the same batch
  model/params_after_adamw/<name>.npy
  manifest.json              versions, shapes, and how far torch's own float32 run is from the reference

The reference values are computed in float64 from the float32 inputs and saved as float32, so a test against them
measures xgrad's float32 error only. The same computation is repeated in torch float32 and the manifest records,
per saved array, `f32_ratio` = max over elements of |torch_f32 - reference| / (atol + rtol |reference|) with the
C++ test's default tolerance (rtol 1e-4, atol 1e-5): below 1 means PyTorch's own float32 result would pass the
test, which is the evidence that the tolerance is a float32 tolerance and not a loose one.
"""

import json
import math
import os
import shutil
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
RTOL, ATOL = 1e-4, 1e-5  # the C++ test's default tolerance, used here only to report f32_ratio

manifest = {
    "generator": "tests/golden/make_golden.py",
    "torch": torch.__version__,
    "numpy": np.__version__,
    "reference_dtype": "float64 (saved as float32)",
    "f32_ratio": "max |torch_float32 - reference| / (1e-5 + 1e-4 |reference|); < 1: torch's float32 passes",
    "ops": {},
    "model": {},
}


def rng_for(name):
    """A generator seeded from the case name, so adding a case does not change the others' inputs."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    array = np.array(array, order="C")  # not ascontiguousarray: it turns a 0-d array into shape (1,)
    assert array.dtype in (np.float32, np.int64), (path, array.dtype)
    np.save(path, array, allow_pickle=False)


def f32_ratio(f32, f64):
    f32, f64 = np.asarray(f32, np.float64), np.asarray(f64, np.float64)
    if f64.size == 0:
        return 0.0
    return float(np.max(np.abs(f32 - f64) / (ATOL + RTOL * np.abs(f64))))


def normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def uniform(rng, shape, lo, hi):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def away_from_zero(rng, shape, lo=0.3, hi=1.5):
    """|x| in [lo, hi) with random sign: keeps relu, abs and division away from their kinks and poles."""
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (sign * rng.uniform(lo, hi, shape)).astype(np.float32)


# ---- ops ------------------------------------------------------------------------------------------------------


def run_op(fn, inputs, dtype, W=None):
    """out = fn(**inputs) in `dtype`; with W, also the gradients of sum(out * W) on every float input's .grad."""
    tensors = {}
    for k, v in inputs.items():
        if v.dtype == np.int64:
            tensors[k] = torch.from_numpy(v)
        else:
            tensors[k] = torch.tensor(v, dtype=dtype, requires_grad=True)
    out = fn(**tensors)
    if W is not None:
        (out * torch.tensor(W, dtype=dtype)).sum().backward()
    return out, tensors


def op_case(name, inputs, fn):
    """Saves inputs, the float64 output, W and the gradients of sum(out * W) for one op."""
    rng = rng_for(name + "/W")
    W = normal(rng, tuple(run_op(fn, inputs, torch.float64)[0].shape))
    out64, t64 = run_op(fn, inputs, torch.float64, W)
    out32, t32 = run_op(fn, inputs, torch.float32, W)

    d = os.path.join(OUT, "ops", name)
    info = {"inputs": {}, "out": list(out64.shape), "f32_ratio": {}}
    for k, v in inputs.items():
        save(os.path.join(d, k + ".npy"), v)
        info["inputs"][k] = {"shape": list(v.shape), "dtype": str(v.dtype)}
    save(os.path.join(d, "out.npy"), out64.detach().numpy().astype(np.float32))
    save(os.path.join(d, "W.npy"), W)
    info["f32_ratio"]["out"] = f32_ratio(out32.detach().numpy(), out64.detach().numpy())
    for k, v in inputs.items():
        if v.dtype == np.int64:
            continue
        g64, g32 = t64[k].grad.numpy(), t32[k].grad.numpy()
        save(os.path.join(d, "grad_" + k + ".npy"), g64.astype(np.float32))
        info["f32_ratio"]["grad_" + k] = f32_ratio(g32, g64)
    manifest["ops"][name] = info


def sdpa_causal(q, k, v):
    """xgrad's nn::scaled_dot_product_attention with the causal mask and scale 1/sqrt(d_k)."""
    T, d_k = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d_k))
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def make_ops():
    def r(name):
        return rng_for(name)

    g = r("add_broadcast")
    op_case("add_broadcast", {"a": normal(g, (2, 3, 4)), "b": normal(g, (3, 1))}, lambda a, b: a + b)
    g = r("sub_broadcast")
    op_case("sub_broadcast", {"a": normal(g, (4,)), "b": normal(g, (2, 3, 1))}, lambda a, b: a - b)
    g = r("mul_broadcast")
    op_case("mul_broadcast", {"a": normal(g, (2, 1, 4)), "b": normal(g, (3, 1))}, lambda a, b: a * b)
    g = r("div_broadcast")
    op_case("div_broadcast", {"a": normal(g, (2, 3, 4)), "b": away_from_zero(g, (1, 4), 0.5, 1.5)},
            lambda a, b: a / b)
    g = r("matmul_batched_broadcast")
    op_case("matmul_batched_broadcast", {"a": normal(g, (2, 1, 3, 4)), "b": normal(g, (3, 4, 5))},
            lambda a, b: a @ b)
    g = r("matmul_2d")
    op_case("matmul_2d", {"a": normal(g, (5, 7)), "b": normal(g, (7, 3))}, lambda a, b: a @ b)
    g = r("softmax_last")
    op_case("softmax_last", {"x": normal(g, (2, 3, 5), 2.0)}, lambda x: torch.softmax(x, dim=-1))
    g = r("softmax_axis1")
    op_case("softmax_axis1", {"x": normal(g, (2, 4, 3), 2.0)}, lambda x: torch.softmax(x, dim=1))
    g = r("log_softmax_last")
    op_case("log_softmax_last", {"x": normal(g, (3, 6), 2.0)}, lambda x: torch.log_softmax(x, dim=-1))
    g = r("layer_norm")
    op_case("layer_norm",
            {"x": normal(g, (2, 3, 8), 2.0) + 0.5, "weight": 1 + normal(g, (8,), 0.3), "bias": normal(g, (8,), 0.3)},
            lambda x, weight, bias: F.layer_norm(x, (8,), weight, bias, eps=1e-5))
    g = r("rms_norm")
    op_case("rms_norm", {"x": normal(g, (3, 2, 6)), "weight": 1 + normal(g, (6,), 0.3)},
            lambda x, weight: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * weight)
    g = r("gelu_tanh")
    op_case("gelu_tanh", {"x": normal(g, (3, 7), 2.0)}, lambda x: F.gelu(x, approximate="tanh"))
    g = r("gelu_erf")
    op_case("gelu_erf", {"x": normal(g, (3, 7), 2.0)}, lambda x: F.gelu(x))
    g = r("relu")
    op_case("relu", {"x": away_from_zero(g, (4, 5))}, lambda x: torch.relu(x))
    g = r("exp")
    op_case("exp", {"x": normal(g, (3, 4))}, lambda x: torch.exp(x))
    g = r("log")
    op_case("log", {"x": uniform(g, (3, 4), 0.2, 3.0)}, lambda x: torch.log(x))
    g = r("tanh")
    op_case("tanh", {"x": normal(g, (3, 4), 1.5)}, lambda x: torch.tanh(x))
    g = r("sigmoid")
    op_case("sigmoid", {"x": normal(g, (3, 4), 2.0)}, lambda x: torch.sigmoid(x))
    g = r("sum_axes_0_2")
    op_case("sum_axes_0_2", {"x": normal(g, (2, 3, 4))}, lambda x: x.sum(dim=(0, 2)))
    g = r("sum_all")
    op_case("sum_all", {"x": normal(g, (2, 3, 4))}, lambda x: x.sum())
    g = r("mean_last_keepdim")
    op_case("mean_last_keepdim", {"x": normal(g, (2, 3, 4))}, lambda x: x.mean(dim=-1, keepdim=True))
    g = r("mean_all")
    op_case("mean_all", {"x": normal(g, (2, 3, 4))}, lambda x: x.mean())
    g = r("logsumexp_last")
    op_case("logsumexp_last", {"x": normal(g, (3, 5), 2.0)}, lambda x: torch.logsumexp(x, dim=-1))

    g = r("cross_entropy_ignore")
    targets = g.integers(0, 6, (3, 4)).astype(np.int64)
    targets[0, 1] = targets[2, 0] = targets[2, 3] = -1
    op_case("cross_entropy_ignore", {"logits": normal(g, (3, 4, 6), 2.0), "targets": targets},
            lambda logits, targets: F.cross_entropy(logits.reshape(-1, 6), targets.reshape(-1), ignore_index=-1))

    g = r("embedding")
    indices = np.array([[0, 3, 3], [6, 1, 0]], dtype=np.int64)  # repeats: the gradient must accumulate
    op_case("embedding", {"weight": normal(g, (7, 5)), "indices": indices},
            lambda weight, indices: F.embedding(indices, weight))

    g = r("attention_causal")
    op_case("attention_causal", {"q": normal(g, (2, 2, 5, 4)), "k": normal(g, (2, 2, 5, 4)),
                                 "v": normal(g, (2, 2, 5, 4))}, sdpa_causal)


# ---- the reference model --------------------------------------------------------------------------------------

# The model of tests/test_golden.cpp: xgrad::nn::ModelConfig with these sizes and every other field at its default
# (mlp, layer_norm, residual, causal on; scale sqrt_dk; d_ff = 4 d_model).
VOCAB, SEQ, D_MODEL, N_HEADS, N_LAYERS, BATCH = 20, 6, 16, 2, 2, 3
D_FF, D_K = 4 * D_MODEL, D_MODEL // N_HEADS
LR, BETAS, EPS, WEIGHT_DECAY, STEPS = 1e-2, (0.9, 0.999), 1e-8, 0.01, 10


def param_shapes():
    """xgrad's AttentionModel.named_parameters() in order, with xgrad's shapes (Linear weight [in, out])."""
    shapes = [("tok_emb.weight", (VOCAB, D_MODEL)), ("pos_emb.weight", (SEQ, D_MODEL))]
    for i in range(N_LAYERS):
        b = f"blocks.{i}."
        shapes += [(b + "ln_1.weight", (D_MODEL,)), (b + "ln_1.bias", (D_MODEL,))]
        shapes += [(b + f"attn.w_{n}.weight", (D_MODEL, D_MODEL)) for n in "qkvo"]
        shapes += [(b + "ln_2.weight", (D_MODEL,)), (b + "ln_2.bias", (D_MODEL,)),
                   (b + "mlp.fc_in.weight", (D_MODEL, D_FF)), (b + "mlp.fc_in.bias", (D_FF,)),
                   (b + "mlp.fc_out.weight", (D_FF, D_MODEL)), (b + "mlp.fc_out.bias", (D_MODEL,))]
    shapes += [("ln_f.weight", (D_MODEL,)), ("ln_f.bias", (D_MODEL,)),
               ("head.weight", (D_MODEL, VOCAB)), ("head.bias", (VOCAB,))]
    return shapes


def init_params(rng):
    """Values in the spirit of xgrad's init, but with LayerNorm weights away from 1 and biases away from 0 so that
    every parameter's role is exercised (a bias of exactly 0 would hide a missing `+ bias`)."""
    params = {}
    for name, shape in param_shapes():
        if name.endswith("emb.weight"):
            params[name] = normal(rng, shape)
        elif len(shape) == 2:  # Linear weight [in, out]: LeCun normal N(0, 1/in)
            params[name] = normal(rng, shape, 1.0 / math.sqrt(shape[0]))
        elif "ln" in name and name.endswith(".weight"):
            params[name] = 1 + normal(rng, shape, 0.2)
        else:
            params[name] = normal(rng, shape, 0.1)
    return params


def model_forward(p, tokens):
    """tokens [B, T] → logits [B, T, VOCAB], written out with explicit tensors as xgrad's AttentionModel computes."""
    B, T = tokens.shape
    x = p["tok_emb.weight"][tokens] + p["pos_emb.weight"][:T]
    for i in range(N_LAYERS):
        b = f"blocks.{i}."
        h = F.layer_norm(x, (D_MODEL,), p[b + "ln_1.weight"], p[b + "ln_1.bias"], eps=1e-5)

        def heads(w):
            return (h @ p[b + f"attn.w_{w}.weight"]).reshape(B, T, N_HEADS, D_K).transpose(1, 2)

        a = sdpa_causal(heads("q"), heads("k"), heads("v"))  # [B, H, T, d_k]
        x = x + a.transpose(1, 2).reshape(B, T, D_MODEL) @ p[b + "attn.w_o.weight"]
        h = F.layer_norm(x, (D_MODEL,), p[b + "ln_2.weight"], p[b + "ln_2.bias"], eps=1e-5)
        h = F.gelu(h @ p[b + "mlp.fc_in.weight"] + p[b + "mlp.fc_in.bias"], approximate="tanh")
        x = x + h @ p[b + "mlp.fc_out.weight"] + p[b + "mlp.fc_out.bias"]
    x = F.layer_norm(x, (D_MODEL,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    return x @ p["head.weight"] + p["head.bias"]


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-1)


def run_model(init, tokens, targets, dtype):
    p = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in init.items()}
    tok, tgt = torch.from_numpy(tokens), torch.from_numpy(targets)
    logits = model_forward(p, tok)
    loss = loss_fn(logits, tgt)
    loss.backward()
    result = {"logits": logits.detach().numpy(), "loss": loss.detach().numpy(),
              "grads": {k: t.grad.numpy().copy() for k, t in p.items()}}

    # AdamW on the same batch, llm.c style: record the loss, then step (so losses[0] is the initial loss).
    opt = torch.optim.AdamW(list(p.values()), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model_forward(p, tok), tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    result["adamw_losses"] = np.array(losses)
    result["params_after_adamw"] = {k: t.detach().numpy().copy() for k, t in p.items()}
    return result


def make_model():
    rng = rng_for("model")
    init = init_params(rng)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    targets = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    targets[0, 0] = targets[1, 3] = targets[2, 5] = -1  # ignored positions

    ref = run_model(init, tokens, targets, torch.float64)
    f32 = run_model(init, tokens, targets, torch.float32)

    d = os.path.join(OUT, "model")
    save(os.path.join(d, "tokens.npy"), tokens)
    save(os.path.join(d, "targets.npy"), targets)
    with open(os.path.join(d, "param_names.txt"), "w") as f:
        f.writelines(name + "\n" for name, _ in param_shapes())
    ratios = {}
    for name, _ in param_shapes():
        save(os.path.join(d, "params", name + ".npy"), init[name])
        save(os.path.join(d, "grads", name + ".npy"), ref["grads"][name].astype(np.float32))
        save(os.path.join(d, "params_after_adamw", name + ".npy"),
             ref["params_after_adamw"][name].astype(np.float32))
        ratios["grads/" + name] = f32_ratio(f32["grads"][name], ref["grads"][name])
        ratios["params_after_adamw/" + name] = f32_ratio(f32["params_after_adamw"][name],
                                                         ref["params_after_adamw"][name])
    for key in ("logits", "loss", "adamw_losses"):
        save(os.path.join(d, key + ".npy"), np.asarray(ref[key]).astype(np.float32))
        ratios[key] = f32_ratio(f32[key], ref[key])

    manifest["model"] = {
        "config": {"vocab_size": VOCAB, "max_seq_len": SEQ, "d_model": D_MODEL, "n_heads": N_HEADS,
                   "n_layers": N_LAYERS, "d_ff": D_FF, "batch": BATCH, "scale": "sqrt_dk", "causal": True,
                   "layer_norm_eps": 1e-5, "gelu": "tanh"},
        "adamw": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WEIGHT_DECAY, "steps": STEPS},
        "loss": float(ref["loss"]),
        "adamw_losses": [float(v) for v in ref["adamw_losses"]],
        "f32_ratio_max": {
            "logits": ratios["logits"], "loss": ratios["loss"], "adamw_losses": ratios["adamw_losses"],
            "grads": max(v for k, v in ratios.items() if k.startswith("grads/")),
            "params_after_adamw": max(v for k, v in ratios.items() if k.startswith("params_after_adamw/")),
        },
        "f32_ratio": ratios,
    }


def main():
    torch.set_num_threads(1)  # the reduction order, hence the last bits of the float64 reference, stay fixed
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)  # a removed case must not leave stale files behind
    make_ops()
    make_model()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(OUT) for fn in fns)
    print(f"wrote {OUT} ({total / 1024:.0f} KiB); max torch float32 ratios: {manifest['model']['f32_ratio_max']}")


if __name__ == "__main__":
    main()
