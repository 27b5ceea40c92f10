// Forms of a weight that a device's kernels rearrange once (for example rows interleaved for
// int8 dot products), kept with the weight: every version and kernel that reads the weight
// shares one copy, and rebinding the weight drops them (the forms describe the old data).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace iron {

class PreparedForms {
 public:
  using Form = std::shared_ptr<const void>;
  /// The form called `key`, made by `make` on the first request for it.
  Form get(const std::string& key, const std::function<Form()>& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    Form& form = forms_[key];
    if (!form) form = make();
    return form;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Form> forms_;
};

}  // namespace iron
