#include "data/registry.h"

namespace xgrad::data {

std::unique_ptr<Task> make_task(const std::string& name, const SettingValues& given) {
  const TaskEntry* entry = TaskRegistry::instance().find(name);
  if (!entry)
    throw TaskError("task '" + name + "' is unknown (allowed: " + TaskRegistry::instance().joined_names() + ")");
  return entry->build(resolve_settings(entry->settings, given.json()));
}

}  // namespace xgrad::data
