// JsonFields: strict, typed reading of a JSON object's members for checkpoint documents —
// missing keys, wrong types and unknown keys throw strata::Error naming the key.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <set>
#include <string>

#include "framework/core/error.hpp"

namespace strata::checkpoint {

// Reads typed members of one JSON object; done() rejects keys never asked for.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j.is_object()) fail("checkpoint", "{} is not an object", where_);
  }
  const nlohmann::json& need(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) fail("checkpoint", "{} lacks '{}'", where_, key);
    return *it;
  }
  const nlohmann::json* maybe(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::int64_t i64(const std::string& key) {
    const nlohmann::json& v = need(key);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
      fail("checkpoint", "{}.{} is not a 64-bit integer", where_, key);
    return v.get<std::int64_t>();
  }
  std::uint64_t u64(const std::string& key) {
    const nlohmann::json& v = need(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      fail("checkpoint", "{}.{} is not a non-negative integer", where_, key);
    return v.get<std::uint64_t>();
  }
  double number(const std::string& key) {
    const nlohmann::json& v = need(key);
    if (!v.is_number()) fail("checkpoint", "{}.{} is not a number", where_, key);
    return v.get<double>();
  }
  bool boolean(const std::string& key) {
    const nlohmann::json& v = need(key);
    if (!v.is_boolean()) fail("checkpoint", "{}.{} is not true/false", where_, key);
    return v.get<bool>();
  }
  std::string string(const std::string& key) {
    const nlohmann::json& v = need(key);
    if (!v.is_string()) fail("checkpoint", "{}.{} is not a string", where_, key);
    return v.get<std::string>();
  }
  void done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) fail("checkpoint", "{} has unknown key '{}'", where_, it.key());
  }
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace strata::checkpoint
