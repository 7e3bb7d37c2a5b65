// Safetensors reading and writing, and checkpoints of models and optimizers on top of it.
//
// The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON header, then the data section. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section) and
// may hold "__metadata__", a string-to-string map.
//
// A reader takes files from anywhere (PyTorch scripts, other tools, truncated copies), so it
// trusts nothing: every size is checked against the file's actual size before anything is
// allocated or read, and the tensors must tile the data section exactly, as the reference
// implementation requires (which also catches duplicate names, which a JSON parser would
// silently merge).
#include "models/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "core/check.h"
#include "core/fs.h"

namespace scalescope {
namespace {

// The data section is raw little-endian floats, read and written as the host's own.
static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host would need byte swaps");

constexpr size_t kHeaderLengthBytes = 8;
constexpr size_t kHeaderAlignment = 8;  // data starts 8-byte aligned, as the reference writer
constexpr const char* kMetadataKey = "__metadata__";
constexpr std::string_view kTrainerPrefix = "trainer.";
constexpr const char* kSuffix = ".safetensors";

// Where one tensor's bytes sit in the data section, once validated.
struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A header value in a message; bytes that are not UTF-8 replaced rather than thrown about.
std::string text_of(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A non-negative integer of a JSON value; false for anything else (negative, fractional,
// strings, numbers beyond 64 bits).
bool as_u64(const nlohmann::json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return true;
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e,
                  uint64_t data_bytes) {
  SS_CHECK_INPUT(e.is_object(), "safetensors file '{}': entry '{}' is not an object but {}", path,
                 name, e.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    SS_CHECK_INPUT(e.contains(key), "safetensors file '{}': tensor '{}' has no '{}'", path, name,
                   key);
  }
  const nlohmann::json& dtype = e["dtype"];
  SS_CHECK_INPUT(dtype.is_string(),
                 "safetensors file '{}': tensor '{}' has a dtype that is not a string", path, name);
  SS_CHECK_INPUT(dtype.get<std::string>() == "F32",
                 "safetensors file '{}': tensor '{}' has dtype {}; only F32 is supported", path,
                 name, dtype.get<std::string>());

  const nlohmann::json& shape = e["shape"];
  SS_CHECK_INPUT(shape.is_array(),
                 "safetensors file '{}': tensor '{}' has a shape that is not an array", path, name);
  std::vector<int64_t> dims;
  for (const nlohmann::json& d : shape) {
    uint64_t dim = 0;
    SS_CHECK_INPUT(
        as_u64(d, dim) && dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
        "safetensors file '{}': tensor '{}' has shape {}, not a list of non-negative "
        "integers",
        path, name, text_of(shape));
    dims.push_back(static_cast<int64_t>(dim));
  }
  // The element count, guarded against overflow; whether the file holds that many bytes is
  // checked with the offsets below, and nothing is allocated before.
  constexpr uint64_t kMaxNumel = std::numeric_limits<uint64_t>::max() / sizeof(float);
  uint64_t numel = 1;
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) numel = 0;
  for (int64_t d : dims) {
    if (numel == 0) break;
    const uint64_t dim = static_cast<uint64_t>(d);
    SS_CHECK_INPUT(
        numel <= kMaxNumel / dim,
        "safetensors file '{}': tensor '{}' has shape {}, too many elements to be stored", path,
        name, text_of(shape));
    numel *= dim;
  }

  const nlohmann::json& offsets = e["data_offsets"];
  Entry entry{name, Shape(std::move(dims)), 0, 0};
  SS_CHECK_INPUT(offsets.is_array() && offsets.size() == 2 && as_u64(offsets[0], entry.begin) &&
                     as_u64(offsets[1], entry.end) && entry.begin <= entry.end,
                 "safetensors file '{}': tensor '{}' has data_offsets {}, not [begin, end] with "
                 "0 <= begin <= end",
                 path, name, text_of(offsets));
  SS_CHECK_INPUT(
      entry.end - entry.begin == numel * sizeof(float),
      "safetensors file '{}': tensor '{}' has data_offsets [{}, {}] ({} bytes) but its shape "
      "{} needs {} bytes of F32",
      path, name, entry.begin, entry.end, entry.end - entry.begin, text_of(shape),
      numel * sizeof(float));
  SS_CHECK_INPUT(
      entry.end <= data_bytes,
      "safetensors file '{}': tensor '{}' has data_offsets [{}, {}] beyond the end of the "
      "data section ({} bytes; the file is truncated?)",
      path, name, entry.begin, entry.end, data_bytes);
  return entry;
}

void read_exactly(std::ifstream& in, const std::string& path, char* dst, uint64_t offset,
                  uint64_t bytes) {
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(dst, static_cast<std::streamsize>(bytes));
  SS_CHECK_INPUT(in.good() && static_cast<uint64_t>(in.gcount()) == bytes,
                 "safetensors file '{}': cannot read {} bytes at offset {}: {}", path, bytes,
                 offset, in.eof() ? "unexpected end of file" : std::strerror(errno));
}

std::string param_state_name(const std::string& param, const std::string& state) {
  return param + "." + state;
}

// The tensors of a file by name, checked against what a model expects: every expected name
// present with its shape, nothing else.
std::map<std::string, const NamedTensor*> match_tensors(
    const std::string& path, const SafetensorsFile& file,
    const std::vector<std::pair<std::string, Shape>>& expected, const std::string& model_name) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : file.tensors) by_name.emplace(t.name, &t);
  std::set<std::string> wanted;
  for (const auto& [name, shape] : expected) {
    wanted.insert(name);
    const auto it = by_name.find(name);
    SS_CHECK_INPUT(it != by_name.end(),
                   "checkpoint '{}' has no tensor '{}', which model '{}' needs", path, name,
                   model_name);
    SS_CHECK_INPUT(it->second->shape == shape,
                   "checkpoint '{}': tensor '{}' has shape {} but model '{}' expects {}", path,
                   name, it->second->shape.to_string(), model_name, shape.to_string());
  }
  std::string extra;
  size_t extras = 0;
  for (const NamedTensor& t : file.tensors) {
    if (wanted.contains(t.name)) continue;
    if (++extras <= 10) extra += fmt::format("{}'{}'", extra.empty() ? "" : ", ", t.name);
  }
  SS_CHECK_INPUT(extras == 0, "checkpoint '{}' has {} tensor{} that model '{}' does not: {}{}",
                 path, extras, extras == 1 ? "" : "s", model_name, extra,
                 extras > 10 ? ", ..." : "");
  return by_name;
}

std::vector<float> view_to_host(Device& device, const TensorView& view) {
  std::vector<float> host(static_cast<size_t>(view.numel()));
  if (host.empty()) return host;
  Stream& stream = device.default_stream();
  device.copy_to_host(host.data(), view.data, view.bytes(), stream);
  stream.synchronize();
  return host;
}

void host_to_view(Device& device, const std::vector<float>& host, const TensorView& view) {
  SS_CHECK(static_cast<int64_t>(host.size()) == view.numel(),
           "copy of {} values into a tensor of shape {}", host.size(), view.shape.to_string());
  if (host.empty()) return;
  Stream& stream = device.default_stream();
  device.copy_to_device(view.data, host.data(), view.bytes(), stream);
  stream.synchronize();
}

// The optimizer state of a file, validated and laid out as the flat state buffers, before
// anything is changed: a bad file must leave the model and the optimizer as they were.
struct LoadedOptimizerState {
  std::vector<std::vector<float>> flat;  // per state name, model.flat_size() floats
  int64_t steps = 0;
};

LoadedOptimizerState read_optimizer_state(const std::string& path, const Model& model,
                                          const Optimizer& optimizer) {
  const SafetensorsFile file = read_safetensors(path);
  const std::string kind = to_string(optimizer.config().kind);
  const auto found_kind = file.metadata.find("optimizer");
  SS_CHECK_INPUT(found_kind != file.metadata.end(),
                 "optimizer state '{}' has no 'optimizer' entry in its metadata", path);
  SS_CHECK_INPUT(found_kind->second == kind,
                 "optimizer state '{}' holds {} state but the optimizer is {}", path,
                 found_kind->second, kind);
  const auto found_step = file.metadata.find("step");
  SS_CHECK_INPUT(found_step != file.metadata.end(),
                 "optimizer state '{}' has no 'step' entry in its metadata", path);
  const std::string& step_text = found_step->second;
  LoadedOptimizerState loaded;
  const auto [end, ec] =
      std::from_chars(step_text.data(), step_text.data() + step_text.size(), loaded.steps);
  SS_CHECK_INPUT(
      ec == std::errc() && end == step_text.data() + step_text.size() && loaded.steps >= 0,
      "optimizer state '{}': step '{}' is not a non-negative integer", path, step_text);

  const std::vector<std::string> names = optimizer_state_names(optimizer.config());
  std::vector<std::pair<std::string, Shape>> expected;
  for (const ParamInfo& p : model.params()) {
    for (const std::string& s : names)
      expected.emplace_back(param_state_name(p.name, s), p.spec.shape);
  }
  const auto by_name = match_tensors(path, file, expected, model.def().name);
  for (const std::string& s : names) {
    std::vector<float> flat(static_cast<size_t>(model.flat_size()), 0.0f);
    for (size_t i = 0; i < model.params().size(); ++i) {
      const NamedTensor& t = *by_name.at(param_state_name(model.params()[i].name, s));
      std::copy(t.data.begin(), t.data.end(), flat.begin() + model.param_offset(i));
    }
    loaded.flat.push_back(std::move(flat));
  }
  return loaded;
}

}  // namespace

namespace {

// The file's size, checked to be a readable regular file.
uint64_t safetensors_size(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  SS_CHECK_INPUT(!ec && std::filesystem::exists(status), "cannot read safetensors file '{}': {}",
                 path, ec ? ec.message() : std::string("no such file"));
  SS_CHECK_INPUT(std::filesystem::is_regular_file(status),
                 "cannot read safetensors file '{}': not a regular file", path);
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  SS_CHECK_INPUT(!ec, "cannot read safetensors file '{}': {}", path, ec.message());
  SS_CHECK_INPUT(file_bytes >= kHeaderLengthBytes,
                 "safetensors file '{}' is {} bytes long, shorter than the 8-byte header length",
                 path, file_bytes);
  return file_bytes;
}

// The JSON header, and its length in bytes (after the 8-byte length itself).
std::pair<nlohmann::json, uint64_t> read_header(std::ifstream& in, const std::string& path,
                                                uint64_t file_bytes) {
  unsigned char length_bytes[kHeaderLengthBytes];
  read_exactly(in, path, reinterpret_cast<char*>(length_bytes), 0, kHeaderLengthBytes);
  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kHeaderLengthBytes; ++i) {
    header_bytes |= static_cast<uint64_t>(length_bytes[i]) << (8 * i);
  }
  SS_CHECK_INPUT(
      header_bytes <= file_bytes - kHeaderLengthBytes,
      "safetensors file '{}': header length {} is larger than the {} bytes that follow it "
      "(truncated, or not a safetensors file)",
      path, header_bytes, file_bytes - kHeaderLengthBytes);
  std::string header_text(static_cast<size_t>(header_bytes), '\0');
  read_exactly(in, path, header_text.data(), kHeaderLengthBytes, header_bytes);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    throw_usage_error(fmt::format("safetensors file '{}': header is not JSON: {}", path, e.what()));
  }
  SS_CHECK_INPUT(header.is_object(), "safetensors file '{}': header is not a JSON object but {}",
                 path, header.type_name());
  return {std::move(header), header_bytes};
}

// The tensors' entries of the header (sorted by position), the metadata into `file`.
std::vector<Entry> header_entries(const std::string& path, const nlohmann::json& header,
                                  uint64_t data_bytes, SafetensorsFile& file) {
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key != kMetadataKey) {
      entries.push_back(parse_entry(path, key, value, data_bytes));
      continue;
    }
    SS_CHECK_INPUT(value.is_object() || value.is_null(),
                   "safetensors file '{}': __metadata__ is not an object of strings", path);
    if (value.is_null()) continue;
    for (const auto& [mk, mv] : value.items()) {
      SS_CHECK_INPUT(mv.is_string(), "safetensors file '{}': metadata '{}' is not a string but {}",
                     path, mk, mv.type_name());
      file.metadata.emplace(mk, mv.get<std::string>());
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    // Empty tensors may share an offset; their names then fix the order.
    if (a.begin != b.begin) return a.begin < b.begin;
    return a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  return entries;
}

// The tensors must cover the data section without overlaps or gaps: sorted by position,
// each begins where the previous ended and the last ends at the end of the file.
void check_tiling(const std::string& path, const std::vector<Entry>& entries, uint64_t data_bytes) {
  uint64_t expected_begin = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    SS_CHECK_INPUT(
        e.begin >= expected_begin,
        "safetensors file '{}': tensors '{}' [{}, {}] and '{}' [{}, {}] have overlapping "
        "data_offsets",
        path, previous ? previous->name : "", previous ? previous->begin : 0,
        previous ? previous->end : 0, e.name, e.begin, e.end);
    SS_CHECK_INPUT(e.begin == expected_begin,
                   "safetensors file '{}': bytes [{}, {}) of the data section belong to no tensor "
                   "(before '{}')",
                   path, expected_begin, e.begin, e.name);
    expected_begin = e.end;
    previous = &e;
  }
  SS_CHECK_INPUT(expected_begin == data_bytes,
                 "safetensors file '{}': the data section is {} bytes but its tensors cover {}",
                 path, data_bytes, expected_begin);
}

}  // namespace

namespace {

// Reads the file's header and checks it against the file; with `with_data`, the tensors' data
// too.
SafetensorsFile read_safetensors(const std::string& path, bool with_data) {
  const uint64_t file_bytes = safetensors_size(path);
  std::ifstream in(path, std::ios::binary);
  SS_CHECK_INPUT(in.is_open(), "cannot read safetensors file '{}': {}", path, std::strerror(errno));
  const auto [header, header_bytes] = read_header(in, path, file_bytes);
  const uint64_t data_start = kHeaderLengthBytes + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  SafetensorsFile file;
  const std::vector<Entry> entries = header_entries(path, header, data_bytes, file);
  check_tiling(path, entries, data_bytes);
  // Every size is now bounded by the file's: allocation and reads are safe.
  for (const Entry& e : entries) {
    NamedTensor t{e.name, e.shape, {}};
    if (with_data && e.end > e.begin) {
      t.data.resize(static_cast<size_t>(e.shape.numel()));
      read_exactly(in, path, reinterpret_cast<char*>(t.data.data()), data_start + e.begin,
                   e.end - e.begin);
    }
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  return read_safetensors(path, true);
}

SafetensorsFile read_safetensors_index(const std::string& path) {
  return read_safetensors(path, false);
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  // ordered_json keeps the header in the order of the data section, which a reader sees as
  // "file order".
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) header[kMetadataKey] = file.metadata;
  uint64_t offset = 0;
  for (const NamedTensor& t : file.tensors) {
    SS_CHECK(!t.name.empty() && t.name != kMetadataKey,
             "cannot write '{}': '{}' is not a valid tensor name", path, t.name);
    SS_CHECK(!header.contains(t.name), "cannot write '{}': tensor '{}' appears twice", path,
             t.name);
    SS_CHECK(static_cast<int64_t>(t.data.size()) == t.shape.numel(),
             "cannot write '{}': tensor '{}' of shape {} has {} values", path, t.name,
             t.shape.to_string(), t.data.size());
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape.dims()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Padded with spaces (valid JSON whitespace) so that the data section is aligned.
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');

  std::string out;
  out.reserve(kHeaderLengthBytes + text.size() + offset);
  const uint64_t n = text.size();
  for (size_t i = 0; i < kHeaderLengthBytes; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const NamedTensor& t : file.tensors) {
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  }
  write_file_atomic(path, out);
}

std::string optimizer_state_path(const std::string& weights_path) {
  const std::string_view suffix = kSuffix;
  std::string_view stem = weights_path;
  if (stem.ends_with(suffix)) stem.remove_suffix(suffix.size());
  return std::string(stem) + ".optim" + std::string(suffix);
}

void save_checkpoint(const std::string& path, const Model& model, const Optimizer* optimizer,
                     const TrainerState& trainer) {
  const std::string optim_path = optimizer_state_path(path);
  SS_CHECK(optim_path != path, "checkpoint path '{}' is its own optimizer state path", path);
  if (optimizer != nullptr) {
    const OptimizerConfig& config = optimizer->config();
    SafetensorsFile state;
    state.metadata = {{"optimizer", to_string(config.kind)},
                      {"step", std::to_string(optimizer->steps_done())},
                      {"scalescope_model", model.def().name}};
    for (const auto& [key, value] : trainer)
      state.metadata.emplace(std::string(kTrainerPrefix) + key, value);
    const std::vector<TensorView> views = optimizer->state();
    const std::vector<std::string> names = optimizer_state_names(config);
    SS_CHECK(views.size() == names.size(), "optimizer {} has {} state tensors, expected {}",
             to_string(config.kind), views.size(), names.size());
    for (size_t s = 0; s < names.size(); ++s) {
      SS_CHECK(views[s].numel() == model.flat_size(),
               "optimizer state '{}' has {} values but the model's flat buffers {}", names[s],
               views[s].numel(), model.flat_size());
      const std::vector<float> flat = view_to_host(model.device(), views[s]);
      for (size_t i = 0; i < model.params().size(); ++i) {
        const ParamInfo& p = model.params()[i];
        const auto begin = flat.begin() + model.param_offset(i);
        state.tensors.push_back(
            NamedTensor{param_state_name(p.name, names[s]), p.spec.shape,
                        std::vector<float>(begin, begin + p.spec.shape.numel())});
      }
    }
    write_safetensors(optim_path, state);
  } else {
    // A state file left by an earlier save would otherwise be loaded with these weights later.
    std::error_code ignored;
    std::filesystem::remove(optim_path, ignored);
  }

  SafetensorsFile weights;
  weights.metadata = {{"format", "pt"},
                      {"scalescope_model", model.def().name},
                      {"scalescope_input", model.input_shape().to_string()}};
  std::vector<std::vector<float>> host = model.weights_to_host();
  // A tied weight under each of its names, as PyTorch's state_dict has it.
  for (const ParamAlias& a : model.param_aliases()) {
    const ParamInfo& p = model.params()[a.param];
    weights.tensors.push_back(NamedTensor{a.name, p.spec.shape, host[a.param]});
  }
  for (size_t i = 0; i < model.params().size(); ++i) {
    const ParamInfo& p = model.params()[i];
    weights.tensors.push_back(NamedTensor{p.name, p.spec.shape, std::move(host[i])});
  }
  // The buffers after the parameters, as PyTorch's state_dict keeps them beside each layer.
  std::vector<std::vector<float>> buffers = model.buffers_to_host();
  for (size_t i = 0; i < model.buffer_infos().size(); ++i) {
    const ParamInfo& b = model.buffer_infos()[i];
    weights.tensors.push_back(NamedTensor{b.name, b.spec.shape, std::move(buffers[i])});
  }

  // The two files are each atomic but not together: a crash between the writes leaves the new
  // optimizer state beside the previous weights.
  write_safetensors(path, weights);
}

TrainerState load_trainer_state(const std::string& path) {
  const std::string optim_path = optimizer_state_path(path);
  std::error_code ec;
  if (!std::filesystem::exists(optim_path, ec)) return {};
  TrainerState state;
  for (const auto& [key, value] : read_safetensors(optim_path).metadata) {
    if (key.starts_with(kTrainerPrefix)) state.emplace(key.substr(kTrainerPrefix.size()), value);
  }
  return state;
}

void check_checkpoint_files(const std::string& path) {
  (void)read_safetensors_index(path);
  const std::string optim_path = optimizer_state_path(path);
  std::error_code ec;
  if (std::filesystem::exists(optim_path, ec)) (void)read_safetensors_index(optim_path);
}

void load_checkpoint(const std::string& path, Model& model, Optimizer* optimizer) {
  SafetensorsFile file = read_safetensors(path);
  std::vector<std::pair<std::string, Shape>> expected;
  for (const ParamInfo& p : model.params()) expected.emplace_back(p.name, p.spec.shape);
  for (const ParamInfo& b : model.buffer_infos()) expected.emplace_back(b.name, b.spec.shape);
  for (const ParamAlias& a : model.param_aliases()) {
    expected.emplace_back(a.name, model.params()[a.param].spec.shape);
  }
  const auto by_name = match_tensors(path, file, expected, model.def().name);
  // One tensor under two names cannot hold two values.
  for (const ParamAlias& a : model.param_aliases()) {
    const std::string& source = model.params()[a.param].name;
    SS_CHECK(by_name.at(a.name)->data == by_name.at(source)->data,
             "checkpoint '{}': tensors '{}' and '{}' differ, but model '{}' ties them (one "
             "weight under two names)",
             path, a.name, source, model.def().name);
  }
  std::vector<std::vector<float>> values;
  for (const ParamInfo& p : model.params()) values.push_back(by_name.at(p.name)->data);
  std::vector<std::vector<float>> buffers;
  for (const ParamInfo& b : model.buffer_infos()) buffers.push_back(by_name.at(b.name)->data);

  // Everything is read and checked before the model or optimizer changes.
  LoadedOptimizerState state;
  const std::string optim_path = optimizer_state_path(path);
  std::error_code ec;
  const bool has_state = optimizer != nullptr && std::filesystem::exists(optim_path, ec);
  if (has_state) state = read_optimizer_state(optim_path, model, *optimizer);

  model.weights_from_host(values);
  model.buffers_from_host(buffers);
  if (has_state) {
    const std::vector<TensorView> views = optimizer->state();
    SS_CHECK(views.size() == state.flat.size(), "optimizer has {} state tensors, the file {}",
             views.size(), state.flat.size());
    for (size_t s = 0; s < views.size(); ++s) host_to_view(model.device(), state.flat[s], views[s]);
    optimizer->set_steps_done(state.steps);
  }
}

}  // namespace scalescope
