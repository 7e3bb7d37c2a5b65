#include "harness/options/option_schema.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/check.h"
#include "core/fs.h"
#include "core/interrupt.h"

namespace scalescope {
namespace {

template <class T>
std::string text_of(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
    return v ? text_of(*v) : "";
  } else {
    return fmt::format("{}", v);
  }
}

template <class T>
std::string text_of(const std::vector<T>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

// The first failure of `check` on the value (or on each element of a list), or "".
template <class T, class C>
std::string first_failure(const T& value, const C& check, std::string& shown) {
  if constexpr (requires { value.begin(); } && !std::is_same_v<T, std::string>) {
    for (const auto& item : value) {
      if (std::string why = check(item); !why.empty()) {
        shown = text_of(item);
        return why;
      }
    }
    return "";
  } else {
    shown = text_of(value);
    return check(value);
  }
}

}  // namespace

std::string OptionDecl::flag() const {
  std::string_view rest = names;
  while (!rest.empty()) {
    const size_t comma = std::min(rest.find(','), rest.size());
    std::string_view name = rest.substr(0, comma);
    if (name.starts_with('!')) name.remove_prefix(1);
    if (name.starts_with("--")) return std::string(name);
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  return names;
}

OptionDecl& OptionList::add(std::string names, OptionValue value, std::string help) {
  OptionDecl decl;
  decl.names = std::move(names);
  decl.help = std::move(help);
  decl.value = std::move(value);
  const std::string flag = decl.flag();
  if (flag.starts_with("--")) {
    decl.key = flag.substr(2);
    if (decl.negated() && decl.key.starts_with("no-")) decl.key = decl.key.substr(3);
  } else {
    std::transform(flag.begin(), flag.end(), std::back_inserter(decl.key),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  std::replace(decl.key.begin(), decl.key.end(), '-', '_');
  decls_.push_back(std::move(decl));
  return decls_.back();
}

void OptionList::settle(const OptionSources& sources) const {
  for (const auto& step : settle_steps_) step(sources);
}

void OptionList::keep(const std::vector<std::string_view>& keys) {
  std::erase_if(decls_, [&](const OptionDecl& d) {
    return std::find(keys.begin(), keys.end(), d.key) == keys.end();
  });
}

const OptionDecl* OptionList::find(std::string_view key) const {
  for (const OptionDecl& d : decls_) {
    if (d.key == key) return &d;
  }
  return nullptr;
}

OptionSources::OptionSources(const OptionList& list, std::string file) : file_(std::move(file)) {
  for (const OptionDecl& d : list.decls()) entries_[d.key] = Entry{d.flag(), Source::kDefault};
}

void OptionSources::set(std::string_view key, Source source) {
  const auto it = entries_.find(key);
  if (it != entries_.end()) it->second.source = source;
}

OptionSources::Source OptionSources::of(std::string_view key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? Source::kDefault : it->second.source;
}

std::string OptionSources::name(std::string_view key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::string(key);
  if (it->second.source == Source::kFile) return fmt::format("{}: '{}'", file_, key);
  return it->second.flag;
}

std::string OptionSources::subject_text(std::string_view key, const std::string& value) const {
  if (value.empty()) return name(key);
  return of(key) == Source::kFile ? fmt::format("{}: {}", name(key), value)
                                  : fmt::format("{} {}", name(key), value);
}

void check_options(const OptionList& list, const OptionSources& names) {
  for (const OptionDecl& d : list.decls()) {
    std::string shown;
    const std::string why = std::visit(Overloaded{
                                           [](const Choice&) { return std::string(); },
                                           [&](const auto& bound) {
                                             if (!bound.check) return std::string();
                                             return first_failure(*bound.value, bound.check, shown);
                                           },
                                       },
                                       d.value);
    if (why.empty()) continue;
    if (d.is_flag()) shown.clear();  // "--no-tf32 is ...", not "--no-tf32 false is ..."
    throw_usage_error(fmt::format("{}{}{}", names.subject_text(d.key, shown),
                                  why.starts_with(':') ? "" : " ", why));
  }
}

std::string value_text(const OptionDecl& decl) {
  return std::visit(Overloaded{
                        [](const Choice& c) { return c.get(); },
                        [](const auto& bound) { return text_of(*bound.value); },
                    },
                    decl.value);
}

nlohmann::json options_json(const OptionList& list) {
  nlohmann::json j = nlohmann::json::object();
  for (const OptionDecl& d : list.decls()) {
    if (!d.in_config || !d.is_present()) continue;
    j[d.key] = std::visit(Overloaded{
                              [](const Choice& c) { return nlohmann::json(c.get()); },
                              [](const Bound<std::optional<bool>>& b) {  // set: is_present()
                                return nlohmann::json(b.value->value_or(false));
                              },
                              [](const auto& bound) { return nlohmann::json(*bound.value); },
                          },
                          d.value);
  }
  return j;
}

std::vector<std::string> options_argv(const OptionList& list, const OptionList& defaults) {
  SS_CHECK(list.decls().size() == defaults.decls().size(),
           "options_argv: {} declarations against {} defaults", list.decls().size(),
           defaults.decls().size());
  std::vector<std::string> argv;
  for (size_t i = 0; i < list.decls().size(); ++i) {
    const OptionDecl& d = list.decls()[i];
    const OptionDecl& base = defaults.decls()[i];
    SS_CHECK(d.key == base.key, "options_argv: '{}' declared where the defaults have '{}'", d.key,
             base.key);
    const std::string text = value_text(d);
    if (!d.is_present()) continue;
    if (!d.always_written && base.is_present() && text == value_text(base)) continue;
    if (!d.is_flag()) {
      argv.push_back(d.flag());
      argv.push_back(text);
    } else {
      // The flag alone sets its value (false when negated); "--flag=false" the other one
      // (CLI11 inverts the value given to a negated flag).
      argv.push_back((text == "true") != d.negated() ? d.flag() : d.flag() + "=false");
    }
  }
  return argv;
}

OptionCheck<std::string> parses(std::function<void(const std::string&)> parse) {
  return [parse = std::move(parse)](const std::string& text) {
    try {
      parse(text);
      return std::string();
    } catch (const Error& e) {
      return ": " + e.message();
    }
  };
}

OptionCheck<std::string> writable_file(bool dash_is_stdout) {
  return parses([dash_is_stdout](const std::string& path) {
    if (!path.empty() && !(dash_is_stdout && path == "-")) check_can_write(path);
  });
}

void naming(const OptionSources& names, std::string_view key, const std::string& value,
            const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    std::string message = fmt::format("{}: {}", names.subject_text(key, value), e.message());
    if (!e.library().empty()) throw_error(std::move(message));
    throw UsageError(e, std::move(message));
  }
}

void as_usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError&) {
    throw;
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {
    if (!e.library().empty()) throw;
    throw UsageError(e);
  }
}

}  // namespace scalescope
