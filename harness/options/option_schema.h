// One option schema. Every option of the commands and of the config file is declared once —
// flag, config key, help, default (the bound variable's value when declared) and check — in
// groups declared next to the options they fill (trainer/options.h, sweep/options.h,
// run_options.h). The command line registers the declarations (harness/cli), config files
// and a sweep report's "config" block are read and written through them, validate() runs
// their checks, and a command line for another command is written from them.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/overloaded.h"
#include "core/units.h"

namespace scalescope {

// What a value must satisfy: "" when it is accepted, otherwise what a message says after
// naming the option and the value ("must be a positive number of samples"; a text starting
// with ':' follows the value directly).
template <class T>
using OptionCheck = std::function<std::string(const T&)>;

template <class T>
struct ElementOf {
  using type = T;
};
template <class T>
struct ElementOf<std::vector<T>> {
  using type = T;
};

// An option held in a variable of type T; a list's check applies to each element.
template <class T>
struct Bound {
  T* value = nullptr;
  OptionCheck<typename ElementOf<T>::type> check;
};

// An option whose value is one of `names` (an enum), read and written by name; `set` is only
// called with one of them.
struct Choice {
  std::vector<std::string> names;
  std::function<std::string()> get;
  std::function<void(const std::string&)> set;
};

// A flag left unset by default (Bound<std::optional<bool>>, spelt "--flag,!--no-flag") has a
// third state: either spelling sets it, neither leaves it unset, and config files and written
// command lines give it only when set.
using OptionValue =
    std::variant<Bound<bool>, Bound<std::optional<bool>>, Bound<int>, Bound<int64_t>,
                 Bound<uint64_t>, Bound<float>, Bound<double>, Bound<std::string>,
                 Bound<std::vector<int>>, Bound<std::vector<int64_t>>, Bound<std::vector<double>>,
                 Bound<std::vector<std::string>>, Choice>;

struct OptionDecl {
  // CLI11's spelling: "--batch", "-o,--output"; a bool's flag sets it to true, or to false
  // when spelt "!--no-overlap"; a name without dashes is a positional argument ("FILE").
  std::string names;
  std::string help;
  OptionValue value;
  // The config file's and the report's key: the long flag without "--" (and "no-" for a
  // flag that clears it), '-' as '_'; a positional argument's name in lower case. Also the
  // option's name in library messages.
  std::string key;
  bool in_config = true;      // false: command line only
  bool required = false;      // the command refuses to run without it
  bool list_in_file = false;  // a string a config file may also give as a list of integers
  // A list of names split at commas on the command line (names that hold no commas).
  bool comma_separated = false;
  // Shown as the default in --help instead of the value ("" = the value).
  std::string default_text;
  // In the config and in written command lines only while this holds (null: always).
  std::function<bool()> present;
  // Its default follows other options (the learning rate the optimizer's): a written command
  // line gives it even at the value it has by default.
  bool always_written = false;

  // The long flag ("--batch"; "--no-overlap"), or a positional argument's name ("FILE").
  std::string flag() const;
  bool negated() const { return names.starts_with('!'); }
  bool is_flag() const {
    return std::holds_alternative<Bound<bool>>(value) ||
           std::holds_alternative<Bound<std::optional<bool>>>(value);
  }
  bool is_present() const {
    const auto* tri = std::get_if<Bound<std::optional<bool>>>(&value);
    return (!present || present()) && (tri == nullptr || tri->value->has_value());
  }

  OptionDecl& command_line_only() {
    in_config = false;
    return *this;
  }
  OptionDecl& require() {
    required = true;
    return *this;
  }
  OptionDecl& list_accepted_in_file() {
    list_in_file = true;
    return *this;
  }
  OptionDecl& split_at_commas() {
    comma_separated = true;
    return *this;
  }
  OptionDecl& shown_default(std::string text) {
    default_text = std::move(text);
    return *this;
  }
  OptionDecl& present_when(std::function<bool()> condition) {
    present = std::move(condition);
    return *this;
  }
  OptionDecl& written_always() {
    always_written = true;
    return *this;
  }
};

class OptionSources;

// The options of one command (or one options struct), in declaration order.
class OptionList {
 public:
  // REQUIRES: `value` outlives the list. Returns the declaration for further settings, valid
  // until the next add.
  template <class T>
  OptionDecl& add(std::string names, T& value, std::string help,
                  OptionCheck<typename ElementOf<T>::type> check = {}) {
    return add(std::move(names), OptionValue(Bound<T>{&value, std::move(check)}), std::move(help));
  }
  OptionDecl& add(std::string names, Choice choice, std::string help) {
    return add(std::move(names), OptionValue(std::move(choice)), std::move(help));
  }
  OptionDecl& add(std::string names, OptionValue value, std::string help);

  // What a value means may depend on whether it was given (a default that follows another
  // option, a list to expand): `settle` runs these once the sources are known.
  void on_settle(std::function<void(const OptionSources&)> step) {
    settle_steps_.push_back(std::move(step));
  }
  void settle(const OptionSources& sources) const;

  // Drops every declaration whose key is not in `keys` (a command taking part of a group).
  void keep(const std::vector<std::string_view>& keys);

  const std::vector<OptionDecl>& decls() const { return decls_; }
  std::vector<OptionDecl>& decls() { return decls_; }
  const OptionDecl* find(std::string_view key) const;

 private:
  std::vector<OptionDecl> decls_;
  std::vector<std::function<void(const OptionSources&)>> settle_steps_;
};

// Where each option's value came from, and how messages name an option: as the user gave
// it ("--batch 0", "ci.json: 'batch': 0") or, when nothing is known (a library caller such
// as train()), neutrally by its key ("batch 0").
class OptionSources {
 public:
  enum class Source { kDefault, kCommandLine, kFile };

  OptionSources() = default;  // neutral
  // Options of `list`, all defaults until set; `file` names the config file in messages.
  explicit OptionSources(const OptionList& list, std::string file = "");
  void set(std::string_view key, Source source);

  Source of(std::string_view key) const;
  bool given(std::string_view key) const { return of(key) != Source::kDefault; }
  // "--batch", "ci.json: 'batch'" or "batch".
  std::string name(std::string_view key) const;
  // The option and its value: "--batch 0", "ci.json: 'batch': 0" or "batch 0".
  template <class V>
  std::string subject(std::string_view key, const V& value) const {
    return subject_text(key, fmt::format("{}", value));
  }
  std::string subject_text(std::string_view key, const std::string& value) const;

 private:
  struct Entry {
    std::string flag;
    Source source = Source::kDefault;
  };
  std::map<std::string, Entry, std::less<>> entries_;
  std::string file_;
};

// Runs every declaration's check on its value; throws UsageError naming the first bad value
// as `names` says and what would be accepted.
void check_options(const OptionList& list, const OptionSources& names = {});

// The value as the command line spells it ("32,64" for a list; "true"/"false" for a flag).
std::string value_text(const OptionDecl& decl);
// The config block of the options: every present declaration with a key in the file.
nlohmann::json options_json(const OptionList& list);
// A command line giving `list`'s values: the flags of every present declaration whose
// value differs from the same declaration in `defaults` (declared alike on default values).
std::vector<std::string> options_argv(const OptionList& list, const OptionList& defaults);

// Checks shared by many options. `accepted` is what the message says, e.g. "must be a
// positive number of samples".
template <class T>
OptionCheck<T> at_least(T min, std::string accepted) {
  return [min, accepted](const T& v) { return v >= min ? std::string() : accepted; };
}
template <class T>
OptionCheck<T> in_range(T min, T max, std::string accepted) {
  return [=](const T& v) { return v >= min && v <= max ? std::string() : accepted; };
}
// Finite and above `bound` (or at least it, with `or_equal`); infinity and NaN are named as
// not finite, which `accepted` ("must be 0 or more") leaves unsaid.
template <class T>
OptionCheck<T> finite_above(T bound, bool or_equal, std::string accepted) {
  return [=](const T& v) {
    if (!std::isfinite(v)) return accepted + ", and finite";
    return v > bound || (or_equal && v == bound) ? std::string() : accepted;
  };
}
// A size in MiB: finite, positive (or 0 with `zero_allowed`) and at most kMaxMiB, so that its
// bytes are a number (core/units.h mib_to_bytes). The message is `accepted` and the bound.
inline OptionCheck<double> mib_size(bool zero_allowed, const std::string& accepted) {
  const std::string message = accepted + " of at most 2^40 MiB (1 EiB)";
  return [=](const double& v) {
    const bool positive = v > 0.0 || (zero_allowed && v == 0.0);
    return std::isfinite(v) && positive && v <= kMaxMiB ? std::string() : message;
  };
}
// Accepted when `parse` does not throw; the message is the Error's.
OptionCheck<std::string> parses(std::function<void(const std::string&)> parse);
// A file that results will be written to (empty: none; "-": standard output where
// `dash_is_stdout`), checked by check_can_write (core/fs.h) when the options are settled,
// before any work: a measurement is not lost to a write that fails at its end.
OptionCheck<std::string> writable_file(bool dash_is_stdout = false);

// Runs `f`; an Error it throws is thrown again with the option and its value first (a
// UsageError unless a library's: the value is at fault).
void naming(const OptionSources& names, std::string_view key, const std::string& value,
            const std::function<void()>& f);

// Runs `f`, a check of what the user asked for: an Error of ours it throws (not a library's,
// which would be a fault of the machine or of ours) is thrown again as a UsageError.
void as_usage_error(const std::function<void()>& f);

}  // namespace scalescope
