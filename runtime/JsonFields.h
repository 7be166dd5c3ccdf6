// Integers from the JSON headers of files Prism reads (checkpoints): only JSON integers are
// taken. nlohmann's get<int64_t>() of a floating-point number out of range is undefined
// behaviour (the checkpoint fuzz target found `"global_step": 7.7e88`); these throw the same
// json::type_error as a wrong type, which the readers turn into "corrupt" errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace prism::runtime {

inline int64_t jsonInteger(const nlohmann::json &object, const char *key) {
  const nlohmann::json &value = object.at(key);
  if (!value.is_number_integer())
    throw nlohmann::json::type_error::create(302, std::string(key) + " is not an integer", &value);
  return value.get<int64_t>();
}

inline std::vector<int64_t> jsonIntegers(const nlohmann::json &object, const char *key) {
  const nlohmann::json &value = object.at(key);
  if (!value.is_array())
    throw nlohmann::json::type_error::create(302, std::string(key) + " is not a list", &value);
  std::vector<int64_t> integers;
  for (const nlohmann::json &element : value) {
    if (!element.is_number_integer())
      throw nlohmann::json::type_error::create(
          302, std::string(key) + " holds something other than integers", &element);
    integers.push_back(element.get<int64_t>());
  }
  return integers;
}

} // namespace prism::runtime
