#include "nn/module.h"

namespace xgrad::nn {

void Module::check_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error("register: name '" + name + "' must be non-empty and contain no '.'");
  for (const auto& p : params_)
    if (p.first == name) throw Error("register: name '" + name + "' is already a parameter");
  for (const auto& b : buffers_)
    if (b.first == name) throw Error("register: name '" + name + "' is already a buffer");
  for (const auto& c : children_) {
    if (c.first == name) throw Error("register: name '" + name + "' is already a submodule");
    if (c.first.empty()) c.second->check_name(name);  // an inline part's names are this module's names
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor) {
  check_name(name);
  tensor.set_requires_grad(true);
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_name(name);
  tensor.set_requires_grad(false);
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const {
  for (const auto& p : buffers ? buffers_ : params_) out.emplace_back(prefix + p.first, p.second);
  for (const auto& c : children_) c.second->collect(c.first.empty() ? prefix : prefix + c.first + ".", out, buffers);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, false);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, true);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out = named_parameters();
  for (auto& b : named_buffers()) out.push_back(std::move(b));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& p : named_parameters()) out.push_back(p.second);
  return out;
}

void Module::zero_grad() const {
  for (auto& p : parameters()) p.zero_grad();
}

std::size_t Module::num_parameters() const {
  std::size_t n = 0;
  for (auto& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

}  // namespace xgrad::nn
