#include "reports/json_reader.h"

#include <cmath>

#include "core/check.h"

namespace scalescope {

using nlohmann::json;

JsonReader::JsonReader(const json& j, std::string what, std::string path)
    : j_(j), what_(std::move(what)), path_(std::move(path)) {
  SS_CHECK(j_.is_object(), "{}: '{}' must be an object, not {}", what_,
           path_.empty() ? "<root>" : path_, j_.type_name());
}

std::string JsonReader::name(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonReader::wrong_type(std::string_view key, const char* expected, const json& v) const {
  throw_error(fmt::format("{}: '{}' must be {}, not {} ({})", what_, name(key), expected,
                          v.type_name(), v.dump().substr(0, 60)));
}

const json& JsonReader::at(std::string_view key) const {
  const auto it = j_.find(key);
  SS_CHECK(it != j_.end(), "{}: missing key '{}'", what_, name(key));
  return *it;
}

std::string JsonReader::string(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_string()) wrong_type(key, "a string", v);
  return v.get<std::string>();
}

int64_t JsonReader::int64(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_number_integer()) wrong_type(key, "an integer", v);
  return v.get<int64_t>();
}

int JsonReader::int32(std::string_view key) const {
  const int64_t v = int64(key);
  SS_CHECK(v >= INT32_MIN && v <= INT32_MAX, "{}: '{}' is out of range: {}", what_, name(key), v);
  return static_cast<int>(v);
}

double JsonReader::number(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_number()) wrong_type(key, "a number", v);
  const double d = v.get<double>();
  SS_CHECK(std::isfinite(d), "{}: '{}' must be finite, not {}", what_, name(key), d);
  return d;
}

bool JsonReader::boolean(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_boolean()) wrong_type(key, "true or false", v);
  return v.get<bool>();
}

JsonReader JsonReader::object(std::string_view key) const {
  return JsonReader(at(key), what_, name(key));
}

JsonReader JsonReader::element(std::string_view key, size_t index) const {
  const json& a = array(key);
  SS_CHECK(index < a.size(), "{}: '{}' has no element {}", what_, name(key), index);
  return JsonReader(a[index], what_, fmt::format("{}[{}]", name(key), index));
}

const json& JsonReader::array(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_array()) wrong_type(key, "an array", v);
  return v;
}

std::vector<double> JsonReader::numbers(std::string_view key) const {
  std::vector<double> out;
  for (const json& v : array(key)) {
    SS_CHECK(v.is_number() && std::isfinite(v.get<double>()),
             "{}: '{}' must hold only finite numbers, not {}", what_, name(key),
             v.dump().substr(0, 60));
    out.push_back(v.get<double>());
  }
  return out;
}

std::vector<int64_t> JsonReader::int64s(std::string_view key) const {
  std::vector<int64_t> out;
  for (const json& v : array(key)) {
    SS_CHECK(v.is_number_integer(), "{}: '{}' must hold only integers, not {}", what_, name(key),
             v.dump().substr(0, 60));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonReader::strings(std::string_view key) const {
  std::vector<std::string> out;
  for (const json& v : array(key)) {
    SS_CHECK(v.is_string(), "{}: '{}' must hold only strings, not {}", what_, name(key),
             v.dump().substr(0, 60));
    out.push_back(v.get<std::string>());
  }
  return out;
}

void JsonReader::only(const std::set<std::string, std::less<>>& known) const {
  for (const auto& [key, value] : j_.items()) {
    if (!known.contains(key)) {
      throw_error(fmt::format("{}: unknown key '{}'; known keys: {}", what_, name(key),
                              fmt::join(known, ", ")));
    }
  }
}

}  // namespace scalescope
