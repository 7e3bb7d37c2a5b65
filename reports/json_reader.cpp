#include "reports/json_reader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <istream>
#include <streambuf>
#include <utility>

#include "core/byte_source.h"
#include "core/check.h"
#include "core/spelling.h"

namespace scalescope {

using nlohmann::json;

json parse_json(std::string_view text, const std::string& what) {
  return parse_json(text, what, nullptr);
}

namespace {

// Any nlohmann exception of parsing `input` becomes an Error naming `what`.
template <class Input>
json parse_or_throw(Input&& input, const std::string& what,
                    const json::parser_callback_t& callback) {
  try {
    return json::parse(std::forward<Input>(input), callback);
  } catch (const json::exception& e) {
    throw_usage_error(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
}

// A ByteSource as the std::streambuf that nlohmann's parser reads an istream through (a
// character at a time, refilled here a piece at a time). What the source throws (a gzip stream
// cut short) passes through the parser as it is.
class SourceBuffer final : public std::streambuf {
 public:
  explicit SourceBuffer(ByteSource& source) : source_(source) {}

 protected:
  int_type underflow() override {
    const size_t got = source_.read(piece_.data(), piece_.size());
    if (got == 0) return traits_type::eof();
    setg(piece_.data(), piece_.data(), piece_.data() + got);
    return traits_type::to_int_type(piece_[0]);
  }

 private:
  ByteSource& source_;
  std::array<char, 1 << 16> piece_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& what,
                const json::parser_callback_t& callback) {
  return parse_or_throw(text, what, callback);
}

json parse_json(ByteSource& source, const std::string& what,
                const json::parser_callback_t& callback) {
  SourceBuffer buffer(source);
  std::istream in(&buffer);
  return parse_or_throw(in, what, callback);
}

json parse_json_unique_keys(std::string_view text, const std::string& what) {
  std::vector<std::set<std::string>> open;  // the keys of each object being read, innermost last
  std::string twice;
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end) open.pop_back();
    if (event == json::parse_event_t::key &&
        !open.back().insert(parsed.get<std::string>()).second && twice.empty()) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  json j = parse_json(text, what, check);
  SS_CHECK_INPUT(twice.empty(),
                 "{} gives the key '{}' twice in one object; say it once (a JSON reader keeps "
                 "one of the two, so which one was meant is not known)",
                 what, twice);
  return j;
}

std::string dump_json(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

namespace {

// The start of a value for a message.
std::string excerpt(const json& v) {
  return dump_json(v).substr(0, 60);
}

// json's integers are int64_t or uint64_t: an unsigned one above INT64_MAX does not fit.
bool is_int64(const json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX));
}

}  // namespace

JsonReader::JsonReader(const json& j, std::string what, std::string path)
    : j_(j), what_(std::move(what)), path_(std::move(path)) {
  SS_CHECK_INPUT(j_.is_object(), "{}: '{}' must be an object, not {}", what_,
                 path_.empty() ? "<root>" : path_, j_.type_name());
}

std::string JsonReader::name(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonReader::wrong_type(std::string_view key, const char* expected, const json& v) const {
  throw_usage_error(fmt::format("{}: '{}' must be {}, not {} ({})", what_, name(key), expected,
                                v.type_name(), excerpt(v)));
}

const json& JsonReader::at(std::string_view key) const {
  const auto it = j_.find(key);
  SS_CHECK_INPUT(it != j_.end(), "{}: missing key '{}'", what_, name(key));
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
  SS_CHECK_INPUT(is_int64(v), "{}: '{}' is out of range: {} (above 2^63-1)", what_, name(key),
                 excerpt(v));
  return v.get<int64_t>();
}

int JsonReader::int32(std::string_view key) const {
  const int64_t v = int64(key);
  SS_CHECK_INPUT(v >= INT32_MIN && v <= INT32_MAX, "{}: '{}' is out of range: {}", what_, name(key),
                 v);
  return static_cast<int>(v);
}

double JsonReader::number(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_number()) wrong_type(key, "a number", v);
  const double d = v.get<double>();
  SS_CHECK_INPUT(std::isfinite(d), "{}: '{}' must be finite, not {}", what_, name(key), d);
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
  SS_CHECK_INPUT(index < a.size(), "{}: '{}' has no element {}", what_, name(key), index);
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
    SS_CHECK_INPUT(v.is_number() && std::isfinite(v.get<double>()),
                   "{}: '{}' must hold only finite numbers, not {}", what_, name(key), excerpt(v));
    out.push_back(v.get<double>());
  }
  return out;
}

std::vector<int64_t> JsonReader::int64s(std::string_view key) const {
  std::vector<int64_t> out;
  for (const json& v : array(key)) {
    SS_CHECK_INPUT(is_int64(v), "{}: '{}' must hold only integers (of at most 2^63-1), not {}",
                   what_, name(key), excerpt(v));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonReader::strings(std::string_view key) const {
  std::vector<std::string> out;
  for (const json& v : array(key)) {
    SS_CHECK_INPUT(v.is_string(), "{}: '{}' must hold only strings, not {}", what_, name(key),
                   excerpt(v));
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<std::vector<double>> JsonReader::number_rows(std::string_view key) const {
  std::vector<std::vector<double>> out;
  const json& rows = array(key);
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    SS_CHECK_INPUT(
        row.is_array() && std::all_of(row.begin(), row.end(),
                                      [](const json& v) {
                                        return v.is_number() && std::isfinite(v.get<double>());
                                      }),
        "{}: '{}[{}]' must be a list of numbers, not {}", what_, name(key), i, excerpt(row));
    out.push_back(row.get<std::vector<double>>());
  }
  return out;
}

void JsonReader::only(const std::set<std::string, std::less<>>& known) const {
  for (const auto& [key, value] : j_.items()) {
    if (!known.contains(key)) {
      const std::vector<std::string_view> keys(known.begin(), known.end());
      throw_usage_error(fmt::format("{}: unknown key '{}'{}; known keys: {}", what_, name(key),
                                    did_you_mean(key, keys), fmt::join(known, ", ")));
    }
  }
}

}  // namespace scalescope
