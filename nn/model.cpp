#include "nn/model.h"

#include <cmath>

#include "nn/mup.h"

namespace xgrad::nn {

namespace {

// The tied readout's bias, registered as "head" so that it keeps the untied readout's name, head.bias.
class ReadoutBias : public Module {
 public:
  explicit ReadoutBias(std::size_t n) { bias = register_parameter("bias", zeros<float>({n})); }
  Tensor bias;
};

}  // namespace

TransformerBlock::TransformerBlock(const ModelConfig& c, Generator& gen, std::shared_ptr<Generator> dropout_generator)
    : residual(c.residual) {
  if (c.layer_norm) ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.d_model, c.layer_norm_eps, c.bias));
  AttentionLayerContext context;
  context.d_model = c.d_model;
  context.n_heads = c.n_heads;
  context.d_k = c.d_k;
  context.max_seq_len = c.max_seq_len;
  context.causal = c.causal;
  context.init_gain = c.proj_init_gain;
  context.scale = c.scale;
  context.settings = c.settings;
  attn = register_module("attn", make_attention_layer(c.attention, context, gen));
  attn->attn_dropout->p = c.dropout;
  attn->attn_dropout->generator = dropout_generator;
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(c.dropout, dropout_generator));
  if (c.mlp) {
    if (c.layer_norm) ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.d_model, c.layer_norm_eps, c.bias));
    mlp = register_module("mlp", std::make_shared<MLP>(c.d_model, c.d_ff ? c.d_ff : 4 * c.d_model, gen, c.bias));
  }
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor out = resid_dropout->forward(attn->forward(ln_1 ? ln_1->forward(x) : x));
  return mlp_sublayer(residual ? x + out : out, true);
}

Tensor TransformerBlock::forward_at(const Tensor& x, const std::vector<std::size_t>& positions) {
  Tensor out = resid_dropout->forward(attn->forward_at(ln_1 ? ln_1->forward(x) : x, positions));
  return mlp_sublayer(residual ? select_positions(x, positions) + out : out, true);
}

Tensor TransformerBlock::forward_step(const Tensor& x, AttentionCache& cache) {
  Tensor out = attn->forward_step(ln_1 ? ln_1->forward(x) : x, cache);
  return mlp_sublayer(residual ? x + out : out, false);
}

Tensor TransformerBlock::mlp_sublayer(const Tensor& h, bool drop) {
  if (!mlp) return h;
  Tensor m = mlp->forward(ln_2 ? ln_2->forward(h) : h);
  if (drop) m = resid_dropout->forward(m);
  return residual ? h + m : m;
}

AttentionModel::AttentionModel(const ModelConfig& c, std::uint64_t seed) : config_(c) {
  if (c.vocab_size == 0 || c.max_seq_len == 0 || c.d_model == 0 || c.n_heads == 0 || c.n_layers == 0)
    throw Error("AttentionModel: vocab_size, max_seq_len, d_model, n_heads and n_layers must all be > 0");
  if (!(c.emb_init_std > 0) || !(c.proj_init_gain > 0) || !std::isfinite(c.emb_init_std) ||
      !std::isfinite(c.proj_init_gain))
    throw Error("AttentionModel: emb_init_std and proj_init_gain must be finite and > 0");
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw Error("AttentionModel: dropout must be in [0, 1), got " + std::to_string(c.dropout));
  if (c.tie_word_embeddings && c.parametrization == Parametrization::mup)
    throw Error(
        "AttentionModel: tie_word_embeddings is not defined under parametrization mup (the readout has its own init "
        "and multiplier there)");
  Generator gen(seed, /*stream=*/0x696e6974 /* "init" */);
  dropout_generator_ = std::make_shared<Generator>(seed, kDropoutStream);
  tok_emb_ = register_module("tok_emb", std::make_shared<Embedding>(c.vocab_size, c.d_model, gen, c.emb_init_std));
  pos_emb_ = register_module("pos_emb", std::make_shared<Embedding>(c.max_seq_len, c.d_model, gen, c.emb_init_std));
  blocks_ = register_module("blocks", std::make_shared<ModuleList<TransformerBlock>>());
  for (std::size_t i = 0; i < c.n_layers; ++i)
    blocks_->push_back(std::make_shared<TransformerBlock>(c, gen, dropout_generator_));
  if (c.layer_norm) ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(c.d_model, c.layer_norm_eps, c.bias));
  if (!c.tie_word_embeddings)
    head_ = register_module("head", std::make_shared<Linear>(c.d_model, c.vocab_size, c.bias, gen));
  else if (c.bias)
    head_bias_ = register_module("head", std::make_shared<ReadoutBias>(c.vocab_size))->bias;
  drop_ = register_module("drop", std::make_shared<Dropout>(c.dropout, dropout_generator_));
  if (c.parametrization == Parametrization::mup) {
    const MupPlan plan = mup_plan(c, c.base_width);
    for (const MupParameter& p : plan.parameters)
      if (p.name == "head.weight" && p.init_std != 1.0) head_->weight.mutable_value() *= static_cast<float>(p.init_std);
    readout_multiplier_ = plan.readout_multiplier;
  }
}

Tensor AttentionModel::hidden(const index_array& tokens) { return hidden_at(tokens, {}, false); }

Tensor AttentionModel::hidden_at(const index_array& tokens, const std::vector<std::size_t>& positions) {
  return hidden_at(tokens, positions, true);
}

Tensor AttentionModel::hidden_at(const index_array& tokens, const std::vector<std::size_t>& query_positions,
                                 bool select) {
  if (tokens.dimension() != 2 && tokens.dimension() != 3)
    throw Error("AttentionModel: tokens must be [B, T] or [B, T, S], got " +
                shape_str(shape_t(tokens.shape().begin(), tokens.shape().end())));
  const std::size_t T = tokens.shape(1);
  if (T > config_.max_seq_len)
    throw Error("AttentionModel: sequence length " + std::to_string(T) + " exceeds max_seq_len " +
                std::to_string(config_.max_seq_len));
  index_array positions = index_array::from_shape({T});
  for (std::size_t t = 0; t < T; ++t) positions(t) = static_cast<std::int64_t>(t);
  Tensor embedded = tok_emb_->forward(tokens);  // [B, T, d] or [B, T, S, d]
  if (tokens.dimension() == 3) embedded = sum(embedded, {2});
  Tensor x = drop_->forward(embedded + pos_emb_->forward(positions));  // [B, T, d] + [T, d]
  const auto& blocks = blocks_->items();
  for (std::size_t i = 0; i < blocks.size(); ++i)
    x = select && i + 1 == blocks.size() ? blocks[i]->forward_at(x, query_positions) : blocks[i]->forward(x);
  return x;
}

Tensor AttentionModel::forward_step(const index_array& tokens, KvCache& cache) {
  if (!config_.causal)
    throw Error(
        "AttentionModel::forward_step: the model is not causal, so a position's keys and values change "
        "with the positions after it and cannot be cached");
  if (tokens.dimension() != 2 || tokens.shape(1) == 0)
    throw Error("AttentionModel::forward_step: tokens must be [B, n] with n >= 1, got " +
                shape_str(shape_t(tokens.shape().begin(), tokens.shape().end())));
  const std::size_t past = cache.length(), n = tokens.shape(1);
  if (past + n > config_.max_seq_len)
    throw Error("AttentionModel::forward_step: " + std::to_string(past) + " cached and " + std::to_string(n) +
                " new positions exceed max_seq_len " + std::to_string(config_.max_seq_len));
  index_array positions = index_array::from_shape({n});
  for (std::size_t t = 0; t < n; ++t) positions(t) = static_cast<std::int64_t>(past + t);
  Tensor x = tok_emb_->forward(tokens) + pos_emb_->forward(positions);  // [B, n, d] + [n, d]
  const auto& blocks = blocks_->items();
  cache.layers.resize(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward_step(x, cache.layers[i]);
  return readout(x);
}

Tensor AttentionModel::readout(const Tensor& h) {
  Tensor x = ln_f_ ? ln_f_->forward(h) : h;
  if (head_) return head_->forward(readout_multiplier_ != 1.0 ? x * readout_multiplier_ : x);
  // Tied (never under mup, so no multiplier): [..., d_model] @ [d_model, vocab_size], a transposed view of the table.
  Tensor logits = matmul(x, transpose(tok_emb_->weight, 0, 1));
  return head_bias_.defined() ? logits + head_bias_ : logits;
}

Tensor AttentionModel::forward(const index_array& tokens) { return readout(hidden(tokens)); }

Tensor AttentionModel::forward(const index_array& tokens, const index_array& positions) {
  if (tokens.dimension() < 2) return forward(tokens);  // forward's error
  const std::size_t B = tokens.shape(0), T = tokens.shape(1);
  if (positions.dimension() != 1)
    throw Error("AttentionModel: positions must be 1-D, got " +
                shape_str(shape_t(positions.shape().begin(), positions.shape().end())));
  // The sequence positions some row needs: the last block computes only those.
  std::vector<bool> needed(T, false);
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const std::int64_t p = positions(i);
    if (p < 0 || static_cast<std::size_t>(p) >= B * T)
      throw Error("AttentionModel: position " + std::to_string(p) + " is outside [0, " + std::to_string(B * T) +
                  ") for tokens of " + std::to_string(B) + " x " + std::to_string(T));
    needed[static_cast<std::size_t>(p) % T] = true;
  }
  std::vector<std::size_t> seq_positions, row_of(T, 0);
  for (std::size_t t = 0; t < T; ++t)
    if (needed[t]) {
      row_of[t] = seq_positions.size();
      seq_positions.push_back(t);
    }
  const bool all = seq_positions.size() == T || seq_positions.empty();
  const Tensor h = all ? hidden(tokens) : hidden_at(tokens, seq_positions);  // [B, Tn, d_model]
  const std::size_t Tn = h.size(1);
  index_array rows = index_array::from_shape({positions.size()});
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const auto p = static_cast<std::size_t>(positions(i));
    rows(i) = static_cast<std::int64_t>(p / T * Tn + (all ? p % T : row_of[p % T]));
  }
  // The rows of [B * Tn, d_model]; LayerNorm and the readout act on each row alone, so selecting first is exact.
  return readout(index_select(
      reshape(h, {static_cast<std::int64_t>(B * Tn), static_cast<std::int64_t>(config_.d_model)}), 0, rows));
}

std::vector<std::shared_ptr<AttentionLayer>> AttentionModel::attention_layers() const {
  std::vector<std::shared_ptr<AttentionLayer>> out;
  for (auto& b : blocks_->items()) out.push_back(b->attn);
  return out;
}

index_array target_positions(const index_array& targets) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) n += targets.data()[i] != -1;
  index_array positions = index_array::from_shape({n});
  for (std::size_t i = 0, j = 0; i < targets.size(); ++i)
    if (targets.data()[i] != -1) positions(j++) = static_cast<std::int64_t>(i);
  return positions;
}

TargetLoss loss_at_targets(AttentionModel& model, const index_array& inputs, const index_array& targets) {
  if (targets.dimension() != 2 || inputs.dimension() < 2 || targets.shape(0) != inputs.shape(0) ||
      targets.shape(1) != inputs.shape(1))
    throw Error("loss_at_targets: targets must be [B, T] of inputs " +
                shape_str(shape_t(inputs.shape().begin(), inputs.shape().end())) + ", got " +
                shape_str(shape_t(targets.shape().begin(), targets.shape().end())));
  TargetLoss out;
  const index_array positions = target_positions(targets);
  if (positions.size() == 0 || positions.size() == targets.size()) {
    // No target (loss 0, with its graph), or a target everywhere: every row is read out, without a gather.
    out.logits = model.forward(inputs);
    out.targets = targets;
    out.loss = cross_entropy(out.logits, targets);
    return out;
  }
  out.targets = index_array::from_shape({positions.size()});
  for (std::size_t i = 0; i < positions.size(); ++i) out.targets(i) = targets.data()[positions(i)];
  out.logits = model.forward(inputs, positions);
  out.loss = cross_entropy(out.logits, out.targets);
  return out;
}

}  // namespace xgrad::nn
