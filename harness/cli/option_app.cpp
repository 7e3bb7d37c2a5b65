#include "harness/cli/option_app.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/check.h"
#include "core/fs.h"
#include "core/spelling.h"
#include "reports/json_reader.h"

namespace scalescope::cli {
namespace {

// " (did you mean X?)" where `name` is a slip away from one of the choice's names.
std::string choice_meant(const std::string& name, const std::vector<std::string>& names) {
  return did_you_mean(name, std::vector<std::string_view>(names.begin(), names.end()));
}

// CLI11's IsMember, which said "adm not in {sgd,adam}", with the name meant; the same
// "{sgd,adam}" in --help.
CLI::Validator choice_validator(const Choice& c) {
  return CLI::Validator(
      [names = c.names](const std::string& name) {
        if (std::ranges::find(names, name) != names.end()) return std::string();
        return fmt::format("'{}' is not one of {}{}", name, fmt::join(names, ", "),
                           choice_meant(name, names));
      },
      fmt::format("{{{}}}", fmt::join(c.names, ",")));
}

// CLI11 converts a flag's other values with std::stoll inside its callback, where a throw ended
// the program, and took "2x" as 2.
CLI::Validator flag_value_validator() {
  return CLI::Validator(flag_value_error, "");
}

std::vector<std::string> one(const auto& value) {
  return {fmt::format("{}", value)};
}

std::vector<std::string> integers(const JsonReader& r, const std::string& key) {
  if (r.at(key).is_number_integer()) return one(r.int64(key));
  std::vector<std::string> out;
  for (int64_t v : r.int64s(key)) out.push_back(fmt::format("{}", v));
  return out;
}

std::vector<std::string> not_empty(std::vector<std::string> values, const std::string& file,
                                   const std::string& key) {
  SS_CHECK_INPUT(!values.empty(), "{}: '{}' is empty: give at least one value", file, key);
  return values;
}

// Leading zeros of a decimal integer dropped ("010" -> "10", "-007" -> "-7"): CLI11 2.1 reads
// integers in base 0, where a leading zero means octal, so `--batch 010` ran a batch of 8 and
// `--steps 09` was refused as not a number. Hexadecimal ("0x10") is left as it is.
void drop_leading_zeros(std::string& text) {
  const size_t sign = text.find_first_not_of(' ');
  if (sign == std::string::npos) return;
  const size_t digits = sign + (text[sign] == '-' || text[sign] == '+' ? 1 : 0);
  size_t first = digits;
  while (first + 1 < text.size() && text[first] == '0' &&
         std::isdigit(static_cast<unsigned char>(text[first + 1]))) {
    ++first;
  }
  text.erase(digits, first - digits);
}

// " (write 1000)" where `text` is a whole number written as a decimal or in exponent form
// ("1e3", "64.0") that fits T: what the user most likely meant. T's max as a double rounds up
// to a power of two past it, hence `<`.
template <class T>
std::string written_whole(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || v != std::floor(v) ||
      !(v >= static_cast<double>(std::numeric_limits<T>::min()) &&
        v < static_cast<double>(std::numeric_limits<T>::max()))) {
    return {};
  }
  return fmt::format(" (write {})", static_cast<T>(v));
}

// CLI11 2.1 converts 64-bit integers with strtoll and strtoull (base 0) without checking for
// overflow: `--steps 99999999999999999999` trained for 2^63 - 1 steps and `--seed -1` seeded
// 2^64 - 1. This transform refuses such text before the conversion, read the way CLI11 reads
// it once drop_leading_zeros has made a decimal of it, and text CLI11 cannot convert at all,
// which it named as "Could not convert: --batch = 3.5".
template <class T>
CLI::Validator whole_number() {
  return {[](std::string& text) -> std::string {
            drop_leading_zeros(text);
            const char* begin = text.c_str();
            while (*begin == ' ') ++begin;
            char* end = nullptr;
            errno = 0;
            bool outside = false;
            if constexpr (std::is_signed_v<T>) {
              const long long v = std::strtoll(begin, &end, 0);
              outside = v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max();
            } else {
              const unsigned long long v = std::strtoull(begin, &end, 0);
              outside = *begin == '-' || v > std::numeric_limits<T>::max();
            }
            if (end != begin && (outside || errno == ERANGE)) {
              return fmt::format("{} is not a whole number from {} to {}", text,
                                 std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
            }
            T value{};
            if (CLI::detail::lexical_cast(text, value)) return {};
            return fmt::format("{} is not a whole number{}", text, written_whole<T>(text));
          },
          ""};
}

// Text CLI11 cannot take as a floating-point number, named as such before its conversion
// (which said "Could not convert: --lr = abc").
template <class T>
CLI::Validator real_number() {
  return {[](const std::string& text) -> std::string {
            T value{};
            if (CLI::detail::lexical_cast(text, value)) return {};
            return fmt::format("{} is not a number", text);
          },
          ""};
}

// The check of text for an option holding `T`: whole numbers in T's range, numbers, or none.
template <class T>
std::optional<CLI::Validator> number_check() {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return whole_number<T>();
  if constexpr (std::is_floating_point_v<T>) return real_number<T>();
  return std::nullopt;
}

// Registers an option bound to `value` (or to a list), numbers checked to be numbers and
// integers to fit their type.
template <class T>
CLI::Option* add_bound(CLI::App& app, const OptionDecl& d, T& value) {
  CLI::Option* option = app.add_option(d.names, value, d.help);
  if (std::optional<CLI::Validator> check = number_check<typename ElementOf<T>::type>()) {
    option->transform(*check);
  }
  return option;
}

// Registers a list that may also be given split at commas ("--batch 32,64"), each item converted
// and checked as add_bound's value. The list is split here, not by CLI11's delimiter: CLI11 2.1
// drops the empty items it splits off, so `--batch 32,,64` swept 32 and 64 as if the typo were not
// there and `--batch ,` took the next flag for its value.
template <class T>
CLI::Option* add_list(CLI::App& app, const OptionDecl& d, std::vector<T>& values) {
  const std::string flag = d.flag();
  const auto convert = [&values, flag](const CLI::results_t& texts) {
    values.clear();
    for (const std::string& text : texts) {
      std::vector<std::string> items = CLI::detail::split(text, ',');  // "a," gives "a" alone
      if (text.ends_with(',') ||
          std::ranges::any_of(items, [](const std::string& i) { return i.empty(); })) {
        throw CLI::ValidationError(fmt::format(
            "{} {}: an empty item in the list (separate its values by single commas)", flag, text));
      }
      for (std::string& item : items) {
        if (std::optional<CLI::Validator> check = number_check<T>()) {
          const std::string wrong = (*check)(item);
          if (!wrong.empty()) throw CLI::ValidationError(flag, wrong);
        }
        T value{};
        if (!CLI::detail::lexical_cast(item, value)) throw CLI::ConversionError(flag, texts);
        values.push_back(std::move(value));
      }
    }
    return true;
  };
  CLI::Option* option = app.add_option(d.names, convert, d.help);
  option->type_name(CLI::detail::type_name<T>());
  option->type_size(1);
  option->expected(CLI::detail::expected_count<std::vector<T>>::value);
  return option;
}

// The file's value of `d` as the command line would give it (CLI11 converts it from there).
std::vector<std::string> file_inputs(const OptionDecl& d, const JsonReader& r,
                                     const std::string& file) {
  const std::string& key = d.key;
  return std::visit(
      Overloaded{
          // A negated flag's value is inverted by CLI11: give it what the flag would mean.
          [&](const Bound<bool>&) { return one(r.boolean(key) != d.negated()); },
          [&](const Bound<std::optional<bool>>&) { return one(r.boolean(key)); },
          [&](const Bound<int>&) { return one(r.int32(key)); },
          [&](const Bound<int64_t>&) { return one(r.int64(key)); },
          [&](const Bound<uint64_t>&) {
            const int64_t v = r.int64(key);
            SS_CHECK_INPUT(v >= 0, "{}: '{}' must be a non-negative integer, not {}", file, key, v);
            return one(v);
          },
          [&](const Bound<float>&) { return one(r.number(key)); },
          [&](const Bound<double>&) { return one(r.number(key)); },
          [&](const Bound<std::string>&) {
            if (d.list_in_file && r.at(key).is_array()) {
              return one(fmt::format("{}", fmt::join(r.int64s(key), ",")));
            }
            return one(r.string(key));
          },
          [&](const Bound<std::vector<int>>&) { return not_empty(integers(r, key), file, key); },
          [&](const Bound<std::vector<int64_t>>&) {
            return not_empty(integers(r, key), file, key);
          },
          [&](const Bound<std::vector<double>>&) {
            if (!r.at(key).is_array()) return one(r.number(key));
            std::vector<std::string> out;
            for (double v : r.numbers(key)) out.push_back(fmt::format("{}", v));
            return not_empty(std::move(out), file, key);
          },
          [&](const Bound<std::vector<std::string>>&) {
            return r.at(key).is_string() ? one(r.string(key))
                                         : not_empty(r.strings(key), file, key);
          },
          [&](const Choice& c) {
            const std::string name = r.string(key);
            SS_CHECK_INPUT(std::find(c.names.begin(), c.names.end(), name) != c.names.end(),
                           "{}: '{}' is '{}', not one of {}{}", file, key, name,
                           fmt::join(c.names, ", "), choice_meant(name, c.names));
            return one(name);
          },
      },
      d.value);
}

// A config file holds a few KiB of options: `--config /dev/zero` (or a trace named by mistake)
// was read until memory ran out.
constexpr std::streamsize kMaxConfigBytes = 16 << 20;

std::string read_config_text(std::istream& input, const std::string& file) {
  std::string text;
  std::array<char, 64 << 10> chunk{};
  while (input.read(chunk.data(), chunk.size()) || input.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(input.gcount()));
    SS_CHECK_INPUT(std::ssize(text) <= kMaxConfigBytes,
                   "config file {}: over {} MiB, which is no config file of options", file,
                   kMaxConfigBytes >> 20);
  }
  return text;
}

// The mark of the options add_options registered, held by the option itself: a registry
// beside CLI11 grew with every App built and never shrank (the fuzzers build one per input).
constexpr const char* kSchemaMark = "scalescope-schema";

}  // namespace

std::string flag_value_error(const std::string& value) {
  static const std::set<std::string> kWords = {"true",   "false",   "yes", "no", "on", "off",
                                               "enable", "disable", "t",   "f",  "y",  "n"};
  int64_t count = 0;
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, count);
  if (kWords.contains(CLI::detail::to_lower(value)) ||
      (!value.empty() && stop == end && error == std::errc())) {
    return "";
  }
  return fmt::format("'{}' is neither yes nor no (true, false, yes, no, on, off, 1, 0)", value);
}

void check_flag_values(const CLI::App& app, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return;
    const size_t equals = arg.find('=');
    if (!arg.starts_with("--") || equals == std::string::npos) continue;
    const std::string name = arg.substr(2, equals - 2);
    const CLI::Option* option = app.get_option_no_throw("--" + name);
    if (option == nullptr || option->get_items_expected_max() != 0) continue;
    const std::string error = flag_value_error(arg.substr(equals + 1));
    if (!error.empty()) throw CLI::ValidationError("--" + name, error);
  }
}

void add_options(CLI::App& app, OptionList& list) {
  for (OptionDecl& d : list.decls()) {
    CLI::Option* option = std::visit(
        Overloaded{
            [&](Bound<bool>& b) {
              return app.add_flag(d.names, *b.value, d.help)->check(flag_value_validator());
            },
            // CLI11 counts "--flag" as 1 and "--no-flag" as -1; the last one given wins.
            [&](Bound<std::optional<bool>>& b) {
              return app
                  .add_flag_function(
                      d.names,
                      [v = b.value](int64_t n) {
                        *v = n == 0 ? std::nullopt : std::optional<bool>(n > 0);
                      },
                      d.help)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                  ->check(flag_value_validator());
            },
            [&](Choice& c) {
              return app.add_option_function<std::string>(d.names, c.set, d.help)
                  ->check(choice_validator(c));
            },
            // Numbers split at commas; a list of names (models) is the sweep's to split,
            // as its items may hold commas themselves, unless its names hold none.
            [&](Bound<std::vector<std::string>>& b) {
              return d.comma_separated ? add_list(app, d, *b.value)
                                       : app.add_option(d.names, *b.value, d.help);
            },
            [&]<class T>(Bound<std::vector<T>>& b) { return add_list(app, d, *b.value); },
            [&](auto& b) { return add_bound(app, d, *b.value); },
        },
        d.value);
    const std::string shown = d.default_text.empty() ? value_text(d) : d.default_text;
    if (!d.is_flag() && !shown.empty()) option->default_str(shown);
    if (d.required) option->required();
    option->check(
        CLI::Validator([](const std::string&) { return std::string(); }, "", kSchemaMark));
  }
}

bool declared_in_schema(CLI::Option& option) {
  try {
    (void)option.get_validator(kSchemaMark);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

JsonConfig::JsonConfig(const OptionList& list, const CLI::App& app, std::string name,
                       ConfigRecord* record)
    : list_(list), app_(app), name_(std::move(name)), record_(record) {}

std::string JsonConfig::to_config(const CLI::App*, bool, bool, std::string) const {
  return dump_json(options_json(list_), 2) + "\n";
}

std::vector<CLI::ConfigItem> JsonConfig::from_config(std::istream& input) const {
  const std::string file = name_.empty() ? app_.get_config_ptr()->as<std::string>() : name_;
  const std::string text = read_config_text(input, file);
  const nlohmann::json j = parse_json_unique_keys(text, "config file " + file);
  const JsonReader r(j, file);
  std::set<std::string, std::less<>> known;
  for (const OptionDecl& d : list_.decls()) {
    if (d.in_config) known.insert(d.key);
  }
  r.only(known);
  if (record_ != nullptr) record_->name = file;
  std::vector<CLI::ConfigItem> items;
  for (const OptionDecl& d : list_.decls()) {
    if (!d.in_config || !r.has(d.key)) continue;
    items.push_back({.parents = {}, .name = d.flag().substr(2), .inputs = file_inputs(d, r, file)});
    const CLI::Option* option = app_.get_option_no_throw(d.flag());
    if (record_ != nullptr && option != nullptr && option->empty()) record_->keys.insert(d.key);
  }
  return items;
}

void add_config_option(CLI::App& app, const OptionList& list, ConfigRecord* record) {
  app.set_config("--config", "",
                 "JSON file of options (keys: the long flag names with _ for -, as a sweep "
                 "report's \"config\"); flags given here override it. Every process of an MPI "
                 "launch reads it");
  app.config_formatter(std::make_shared<JsonConfig>(list, app, "", record));
}

OptionSources settle_options(const CLI::App& app, const OptionList& list,
                             const ConfigRecord& record) {
  OptionSources sources(list, record.name);
  for (const OptionDecl& d : list.decls()) {
    const CLI::Option* option = app.get_option_no_throw(d.flag());
    if (option == nullptr || option->count() == 0) continue;
    sources.set(d.key, record.keys.contains(d.key) ? OptionSources::Source::kFile
                                                   : OptionSources::Source::kCommandLine);
  }
  list.settle(sources);
  check_options(list, sources);
  return sources;
}

OptionSources parse_with_config(OptionList& list, const std::vector<std::string>& args,
                                const nlohmann::json* config, const std::string& config_name) {
  CLI::App app;
  add_options(app, list);
  ConfigRecord record;
  add_config_option(app, list, &record);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 parses them
  try {
    check_flag_values(app, args);
    app.parse(reversed);
    if (config != nullptr) {
      app.config_formatter(std::make_shared<JsonConfig>(list, app, config_name, &record));
      std::istringstream text(dump_json(*config));
      app.parse_from_stream(text);
    }
  } catch (const CLI::FileError& e) {
    // CLI11 takes a directory for a missing file ("was not readable (missing?)"): say which.
    check_readable(app.get_config_ptr()->as<std::string>());
    throw_usage_error(e.what());
  } catch (const CLI::ParseError& e) {
    throw_usage_error(e.what());
  }
  return settle_options(app, list, record);
}

}  // namespace scalescope::cli
