// Module: the parameter registry every layer derives from (vocabulary of libtorch's C++ frontend).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace xgrad::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Parameters of this module and its submodules, depth first in registration order, with dotted names
  /// ("blocks.0.attn.w_q.weight").
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  /// Buffers of this module and its submodules, named as parameters are: state that is saved in checkpoints but not
  /// trained (no gradient, not in parameters(); e.g. power-iteration vectors), as torch.nn.Module.named_buffers.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  /// named_parameters() then named_buffers(): everything a checkpoint of the module holds (torch's state_dict).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  /// Drops the gradients of every parameter.
  void zero_grad() const;
  /// Total number of scalar parameters.
  std::size_t num_parameters() const;
  /// Training mode flag (for dropout-like layers); propagates to submodules.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 protected:
  /// Registers `tensor` as a parameter named `name` (requires_grad is set) and returns it. Throws xgrad::Error on a
  /// duplicate or empty name, or a name containing '.'.
  Tensor register_parameter(const std::string& name, Tensor tensor);
  /// Registers `tensor` as a buffer named `name` (requires_grad is cleared) and returns it; update it in place
  /// through mutable_value(). Throws xgrad::Error as register_parameter.
  Tensor register_buffer(const std::string& name, Tensor tensor);
  /// Registers a submodule; its parameters and buffers appear under "name.".
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_name(name);
    children_.emplace_back(name, module);
    return module;
  }
  /// Registers a submodule whose parameters appear under this module's own prefix, as if this module had
  /// registered them itself: for a part of this module's computation chosen at run time (an attention layer's
  /// scaling), so parameter names do not depend on how the module is assembled. Throws xgrad::Error if one of the
  /// part's own names is already taken here.
  template <class M>
  std::shared_ptr<M> register_inline_module(std::shared_ptr<M> module) {
    const Module& part = *module;
    for (const auto& p : part.params_) check_name(p.first);
    for (const auto& b : part.buffers_) check_name(b.first);
    for (const auto& c : part.children_) check_name(c.first);
    children_.emplace_back("", module);
    return module;
  }

 private:
  void check_name(const std::string& name) const;
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// An ordered list of submodules named "0", "1", ... (as torch.nn.ModuleList), so parameters read
/// "blocks.0.attn.w_q.weight".
template <class M>
class ModuleList : public Module {
 public:
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
    return items_.back();
  }
  const std::vector<std::shared_ptr<M>>& items() const { return items_; }
  std::size_t size() const { return items_.size(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace xgrad::nn
