// A record's JSON keys declared once, for its writer and its strict reader both, so that a field
// cannot be written and forgotten on reading. A record type R lists its fields in a
// specialization of JsonFields<R>:
//
//   template <>
//   struct JsonFields<NetworkInfo> {
//     static constexpr auto kFields = std::make_tuple(
//         field("interface", &NetworkInfo::interface),   // required
//         optional_field("address", &NetworkInfo::address));  // written when set
//   };
//
// write_fields(r) writes it; read_fields<R>(reader) reads it through JsonReader, so a missing
// or mistyped key is an Error naming the document and the key's dotted path
// ("report run.json: missing key 'environment.host.os'"), never a crash. A field whose type has
// JsonFields of its own (a nested record, a list or an optional of them) is read and written
// through them. Every member of R must be listed: reading and writing check at compile time
// that the list is as long as the struct. A record whose values have a range declares
//
//     static void check(const R& record, const JsonReader& r);  // throws Error naming the key
//
// beside kFields, and read_fields runs it on what it read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "reports/json_reader.h"

namespace scalescope {

template <class R>
struct JsonFields;

template <class T>
concept JsonRecord = requires {
  JsonFields<T>::kFields;
};

// A key and the member it holds. Required: always written, and a missing key is an error (an
// std::optional member is written as null when unset). Optional: written only when
// `written(record)` holds (null `written`: when the value is set — not empty, not zero), and
// an absent (or null) key leaves the member as it is.
template <class R, class T>
struct JsonField {
  const char* key;
  T R::*member;
  bool required = true;
  bool (*written)(const R&) = nullptr;
};

template <class R, class T>
constexpr JsonField<R, T> field(const char* key, T R::*member) {
  return {key, member};
}
template <class R, class T>
constexpr JsonField<R, T> optional_field(const char* key, T R::*member,
                                         bool (*written)(const R&) = nullptr) {
  return {key, member, false, written};
}

// A list whose elements' JSON is defined elsewhere (a record of another library with writer and
// reader functions of its own).
template <class R, class E>
struct JsonListField {
  const char* key;
  std::vector<E> R::*member;
  nlohmann::json (*write)(const E&);
  E (*read)(const JsonReader&);
};
template <class R, class E>
constexpr JsonListField<R, E> list_field(const char* key, std::vector<E> R::*member,
                                         nlohmann::json (*write)(const E&),
                                         E (*read)(const JsonReader&)) {
  return {key, member, write, read};
}

namespace json_fields {

// The number of members of an aggregate: the most initializers T{...} takes (as Boost.PFR
// counts them).
struct AnyMember {
  template <class T>
  operator T&() const&& noexcept;  // declared only: named in unevaluated contexts
};
template <class T, size_t... I>
constexpr bool takes(std::index_sequence<I...>) {
  return requires {
    T{(static_cast<void>(I), AnyMember{})...};
  };
}
template <class T, size_t N = 0>
constexpr size_t member_count() {
  if constexpr (takes<T>(std::make_index_sequence<N + 1>{})) {
    return member_count<T, N + 1>();
  } else {
    return N;
  }
}

template <class R>
constexpr void check_complete() {
  static_assert(std::tuple_size_v<decltype(JsonFields<R>::kFields)> == member_count<R>(),
                "JsonFields<R>::kFields must list every member of R");
}

template <class T>
struct IsRecordList : std::false_type {};
template <JsonRecord T>
struct IsRecordList<std::vector<T>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
bool is_set(const T& v) {
  if constexpr (IsOptional<T>::value) {
    return v.has_value();
  } else if constexpr (requires { v.empty(); }) {
    return !v.empty();
  } else {
    return v != T{};
  }
}

}  // namespace json_fields

template <JsonRecord R>
nlohmann::json write_fields(const R& record);
template <JsonRecord R>
R read_fields(const JsonReader& r);

namespace json_fields {

template <class T>
nlohmann::json value_json(const T& v) {
  if constexpr (JsonRecord<T>) {
    return write_fields(v);
  } else if constexpr (IsOptional<T>::value) {
    return v ? value_json(*v) : nlohmann::json(nullptr);
  } else if constexpr (IsRecordList<T>::value) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) a.push_back(write_fields(e));
    return a;
  } else {
    return nlohmann::json(v);
  }
}

// The value of `key` into `out`, strictly. The types our records hold.
inline void read_value(const JsonReader& r, const char* key, bool& out) {
  out = r.boolean(key);
}
inline void read_value(const JsonReader& r, const char* key, int& out) {
  out = r.int32(key);
}
inline void read_value(const JsonReader& r, const char* key, int64_t& out) {
  out = r.int64(key);
}
inline void read_value(const JsonReader& r, const char* key, double& out) {
  out = r.number(key);
}
inline void read_value(const JsonReader& r, const char* key, std::string& out) {
  out = r.string(key);
}
inline void read_value(const JsonReader& r, const char* key, std::vector<double>& out) {
  out = r.numbers(key);
}
inline void read_value(const JsonReader& r, const char* key, std::vector<int64_t>& out) {
  out = r.int64s(key);
}
inline void read_value(const JsonReader& r, const char* key, std::vector<std::string>& out) {
  out = r.strings(key);
}
inline void read_value(const JsonReader& r, const char* key,
                       std::vector<std::vector<double>>& out) {
  out = r.number_rows(key);
}
inline void read_value(const JsonReader& r, const char* key,
                       std::map<std::string, std::string>& out) {
  const JsonReader object = r.object(key);
  out.clear();
  for (const auto& item : object.value().items())
    out.emplace(item.key(), object.string(item.key()));
}
template <JsonRecord T>
void read_value(const JsonReader& r, const char* key, T& out) {
  out = read_fields<T>(r.object(key));
}
template <JsonRecord T>
void read_value(const JsonReader& r, const char* key, std::vector<T>& out) {
  out.clear();
  const size_t n = r.array(key).size();
  for (size_t i = 0; i < n; ++i) out.push_back(read_fields<T>(r.element(key, i)));
}
template <class T>
void read_value(const JsonReader& r, const char* key, std::optional<T>& out) {
  if (r.at(key).is_null()) {
    out.reset();
    return;
  }
  T value{};
  read_value(r, key, value);
  out = std::move(value);
}

template <class R, class T>
void write_field(const R& record, const JsonField<R, T>& f, nlohmann::json& j) {
  const T& v = record.*f.member;
  if (!f.required && !(f.written != nullptr ? f.written(record) : is_set(v))) return;
  j[f.key] = value_json(v);
}
template <class R, class E>
void write_field(const R& record, const JsonListField<R, E>& f, nlohmann::json& j) {
  nlohmann::json a = nlohmann::json::array();
  for (const E& e : record.*f.member) a.push_back(f.write(e));
  j[f.key] = std::move(a);
}

template <class R, class T>
void read_field(const JsonReader& r, const JsonField<R, T>& f, R& record) {
  if (!f.required && (!r.has(f.key) || r.at(f.key).is_null())) return;
  read_value(r, f.key, record.*f.member);
}
template <class R, class E>
void read_field(const JsonReader& r, const JsonListField<R, E>& f, R& record) {
  std::vector<E>& out = record.*f.member;
  out.clear();
  const size_t n = r.array(f.key).size();
  for (size_t i = 0; i < n; ++i) out.push_back(f.read(r.element(f.key, i)));
}

}  // namespace json_fields

// The record as a JSON object of its fields, in their declared order.
template <JsonRecord R>
nlohmann::json write_fields(const R& record) {
  json_fields::check_complete<R>();
  nlohmann::json j = nlohmann::json::object();
  std::apply([&](const auto&... f) { (json_fields::write_field(record, f, j), ...); },
             JsonFields<R>::kFields);
  return j;
}

// The record `r` holds; throws Error naming the first key that is missing or of the wrong type
// (or, by JsonFields<R>::check, out of range).
// Keys that are not fields are ignored (they may be derived figures written beside them).
template <JsonRecord R>
R read_fields(const JsonReader& r) {
  json_fields::check_complete<R>();
  R record{};
  std::apply([&](const auto&... f) { (json_fields::read_field(r, f, record), ...); },
             JsonFields<R>::kFields);
  if constexpr (requires { JsonFields<R>::check(record, r); }) JsonFields<R>::check(record, r);
  return record;
}

}  // namespace scalescope
