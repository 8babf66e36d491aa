// Registry<Entry>: the one list of the things users add (attention scalings, attention layers, tasks, optimizers,
// experiment presets). Each entry registers itself from its own file with a static Registration, so nothing else in
// xgrad lists the names: the CLI's choices and --help, config.json, sweeps, plots and the report read the registry.
//
// An Entry type provides:
//   std::string name;                 // what users type (--scale sqrt_dk); unique within the registry, and a valid
//                                     // entry name (is_entry_name: it is a flag value, a list item, a file name)
//   int order;                        // place in listings and report order (ties: registration order)
//   static constexpr const char* kind // what the entries are called in messages, e.g. "scaling"
// and may provide
//   static void on_register(Entry& entry, const std::vector<Entry*>& registered);
// which add() calls before the entry joins the ones `registered` already: it checks the entry (throwing
// RegistryError, which names the entry, to refuse it) and may complete it and those registered (a scaling without a
// plot style gets one, and one whose chosen style a later entry declares gets another).
// An entry with a `build` function (scalings, attention layers, optimizers, tasks) must have one.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/escape.h"

namespace xgrad {

namespace detail {
template <class Entry, class = void>
struct has_on_register : std::false_type {};
template <class Entry>
struct has_on_register<Entry, std::void_t<decltype(Entry::on_register(std::declval<Entry&>(),
                                                                      std::declval<const std::vector<Entry*>&>()))>>
    : std::true_type {};
template <class Entry, class = void>
struct has_build : std::false_type {};
template <class Entry>
struct has_build<Entry, std::void_t<decltype(std::declval<Entry&>().build)>> : std::true_type {};
}  // namespace detail

/// The longest entry name: it goes into run directory names and plot legends.
inline constexpr std::size_t kMaxEntryName = 64;

/// Whether `name` may name a registry entry: 1 to kMaxEntryName lowercase ASCII letters, digits and '_', starting
/// with a letter (sqrt_dk, kv_recall, adamw). Names are typed as flag values, listed with ',' (--scale a,b), joined
/// with '@' (--arms sgd@0.1) and written into run directory and file names: nothing else can stand in all of those.
inline bool is_entry_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxEntryName || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

/// Thrown for an unknown or duplicate name; the message names the kind and lists the registered names.
class RegistryError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

template <class Entry>
class Registry {
 public:
  /// The registry of this entry type. A function-local static, so entries may register from any translation unit's
  /// static initialisers in any order.
  static Registry& instance() {
    static Registry registry;
    return registry;
  }

  /// A registry of its own, apart from the program's instance() (a test's).
  Registry() = default;

  /// Adds `entry`, registered by `source` (a file, or "built in (file)"). Throws RegistryError on an empty name, a
  /// name that is not is_entry_name, a name already registered (the message names both sources), an empty `build`
  /// function, or when the entry type's on_register refuses it.
  void add(Entry entry, const std::string& source = "") {
    if (entry.name.empty()) throw RegistryError(std::string(Entry::kind) + ": an entry needs a name (" + source + ")");
    if (!is_entry_name(entry.name))
      throw RegistryError(std::string(Entry::kind) + " '" + shortened_name(entry.name) + "'" +
                          ": a name is 1 to 64 lowercase letters, digits and '_', starting with a letter (" + source +
                          ")");
    if constexpr (detail::has_build<Entry>::value)
      if (!entry.build)
        throw RegistryError(std::string(Entry::kind) + " '" + entry.name + "' has no build function (" + source + ")");
    if (find(entry.name))
      throw RegistryError(std::string(Entry::kind) + " '" + entry.name + "' registered twice: by " +
                          this->source(entry.name) + " and by " + source);
    if constexpr (detail::has_on_register<Entry>::value) {
      try {
        std::vector<Entry*> registered;
        for (const auto& e : entries_) registered.push_back(e.get());
        Entry::on_register(entry, registered);
      } catch (const RegistryError& e) {
        throw RegistryError(source.empty() ? e.what() : std::string(e.what()) + " (registered by " + source + ")");
      }
    }
    sources_.emplace_back(entry.name, source);
    entries_.push_back(std::make_unique<Entry>(std::move(entry)));
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const auto& a, const auto& b) { return a->order < b->order; });
  }

  /// The entry called `name`, or null.
  const Entry* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e->name == name) return e.get();
    return nullptr;
  }

  /// The entry called `name`. Throws RegistryError "<kind> '<name>' is unknown (allowed: a, b, c)".
  const Entry& at(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw RegistryError(std::string(Entry::kind) + " '" + name + "' is unknown (allowed: " + joined_names() + ")");
  }

  /// Where the entry called `name` was registered (its source file), or "" when unknown.
  std::string source(const std::string& name) const {
    for (const auto& [n, src] : sources_)
      if (n == name) return src;
    return "";
  }

  /// Every entry, in report order.
  std::vector<const Entry*> entries() const {
    std::vector<const Entry*> out;
    for (const auto& e : entries_) out.push_back(e.get());
    return out;
  }

  /// Every name, in report order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e->name);
    return out;
  }

  /// "a, b, c" (for messages and --help).
  std::string joined_names() const {
    std::string out;
    for (const auto& e : entries_) out += (out.empty() ? "" : ", ") + e->name;
    return out;
  }

  /// Position of `name` in report order, or the number of entries for a name not registered here (a run written by
  /// another build: sorted after every known one).
  std::size_t rank(const std::string& name) const {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i]->name == name) return i;
    return entries_.size();
  }

 private:
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::pair<std::string, std::string>> sources_;  // name, where it was registered
};

/// Messages of registrations refused during static initialisation (duplicate or empty names). Registration records
/// them here because an exception escaping a static initialiser aborts the program before main can report it; main
/// prints them and exits 2.
inline std::vector<std::string>& registration_errors() {
  static std::vector<std::string> errors;
  return errors;
}

/// Registers an entry when its file's static objects are initialised:
///   static const xgrad::Registration<nn::ScalingEntry> registration{make_entry()};
/// `source` defaults to the registering file. A duplicate name is recorded in registration_errors() (the first entry
/// stays), and the executable reports it and exits 2 at start-up.
template <class Entry>
struct Registration {
  explicit Registration(Entry entry, std::string source = __builtin_FILE()) {
    try {
      Registry<Entry>::instance().add(std::move(entry), source);
    } catch (const RegistryError& e) {
      registration_errors().push_back(e.what());
    }
  }
};

}  // namespace xgrad
