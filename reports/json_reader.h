// Strict reading of JSON we wrote ourselves (reports, configs): every key is looked up by
// name, and a missing key or one of the wrong type is an Error naming its dotted path, so a
// truncated or hand-edited file never turns into a silently wrong number.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace scalescope {

class ByteSource;  // core/byte_source.h

// Parses JSON text; any nlohmann exception (syntax, depth...) becomes an Error naming `what`
// ("report run.json is not valid JSON: ..."), the only exception our readers let out.
nlohmann::json parse_json(std::string_view text, const std::string& what);
// parse_json with nlohmann's parser callback: it sees each value as it is read and may drop it
// from the document (returning false), so that a large array need not be held whole.
nlohmann::json parse_json(std::string_view text, const std::string& what,
                          const nlohmann::json::parser_callback_t& callback);
// The same, reading the text from `source` as the parser goes: the text is never held whole.
nlohmann::json parse_json(ByteSource& source, const std::string& what,
                          const nlohmann::json::parser_callback_t& callback);
// parse_json for a file a person wrote (a config file): an object that names a key twice is
// refused too, where parse_json keeps the last value and so silently drops the other.
nlohmann::json parse_json_unique_keys(std::string_view text, const std::string& what);
// JSON text of `j`; bytes of strings that are not valid UTF-8 (user text: labels, paths,
// messages) are replaced by U+FFFD instead of throwing. indent -1: one line.
std::string dump_json(const nlohmann::json& j, int indent = -1);

class JsonReader {
 public:
  // `what` names the document in errors ("report run.json"); `path` is this object's
  // dotted path inside it ("" for the root).
  JsonReader(const nlohmann::json& j, std::string what, std::string path = "");

  bool has(std::string_view key) const { return j_.contains(key); }
  const nlohmann::json& at(std::string_view key) const;
  std::string string(std::string_view key) const;
  // An integer that fits int64_t (not 1.0, not 2^63 or more).
  int64_t int64(std::string_view key) const;
  int int32(std::string_view key) const;
  double number(std::string_view key) const;  // integers accepted; must be finite
  bool boolean(std::string_view key) const;
  JsonReader object(std::string_view key) const;
  // An array element as an object: "points[3]".
  JsonReader element(std::string_view key, size_t index) const;
  const nlohmann::json& array(std::string_view key) const;
  std::vector<double> numbers(std::string_view key) const;
  std::vector<int64_t> int64s(std::string_view key) const;
  std::vector<std::string> strings(std::string_view key) const;
  // An array of arrays of finite numbers (a table: a row per step, a value per bucket).
  std::vector<std::vector<double>> number_rows(std::string_view key) const;
  // Throws naming the first key not in `known` (a misspelt config key must not be ignored).
  void only(const std::set<std::string, std::less<>>& known) const;

  std::string name(std::string_view key) const;
  const nlohmann::json& value() const { return j_; }

 private:
  [[noreturn]] void wrong_type(std::string_view key, const char* expected,
                               const nlohmann::json& v) const;
  const nlohmann::json& j_;
  std::string what_;
  std::string path_;
};

}  // namespace scalescope
