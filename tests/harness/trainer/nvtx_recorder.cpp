// An NVTX tool for tests. NVTX loads it when NVTX_INJECTION64_PATH names this library and
// calls InitializeInjectionNvtx2, which points NVTX's function table at the recorders below.
// Each recorder appends one line to the file named by SCALESCOPE_NVTX_LOG:
//
//   domain   <tid> <handle> <name>
//   string   <tid> <domain> <handle> <text>          (nvtxDomainRegisterStringA)
//   category <tid> <domain> <id> <name>              (domain 0: nvtxNameCategoryA)
//   thread   <tid> <named tid> <name>                (nvtxNameOsThreadA)
//   push     <tid> <domain> <category> <color> <payload type> <payload> <message type> <message>
//   pop      <tid> <domain>                          (domain 0: nvtxRangePop)
//   init     <tid>                                   (attached: the first line)
//
// <tid> is the OS thread id of the caller. Lines are written whole under one mutex, so the
// file's order is an order of the events consistent with the program's own synchronisation:
// a test can reconstruct each thread's sequence and compare threads. Handles are small
// integers handed out here, so that the log can be read without knowing any pointers. Text
// comes last on a line because it may contain spaces.
#define NVTX_NO_IMPL  // a tool needs NVTX's types, not its implementation
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

int g_fd = -1;
std::mutex g_mutex;
std::atomic<uintptr_t> g_next_handle{1};

uint32_t current_tid() {
  return static_cast<uint32_t>(::syscall(SYS_gettid));
}

// One line per event: a newline inside a name would split it.
std::string one_line(const char* text) {
  std::string s = text != nullptr ? text : "(null)";
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

void write_line(std::string line) {
  line += '\n';
  std::lock_guard lock(g_mutex);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(g_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report to; the test sees the missing lines
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// printf into a std::string; the attribute lets the compiler check every format.
__attribute__((format(printf, 1, 2))) std::string format(const char* fmt, ...) {
  char buffer[160];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  return buffer;
}

uintptr_t id_of(const void* handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

template <class Handle>
Handle new_handle() {
  return reinterpret_cast<Handle>(g_next_handle.fetch_add(1));
}

std::string describe(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "0 0 none 0 none -";
  std::string payload;
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_INT64:
      payload = format("int64 %" PRId64, a->payload.llValue);
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
      payload = format("uint64 %" PRIu64, a->payload.ullValue);
      break;
    case NVTX_PAYLOAD_TYPE_INT32:
      payload = format("int32 %" PRId32, a->payload.iValue);
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
      payload = format("uint32 %" PRIu32, a->payload.uiValue);
      break;
    case NVTX_PAYLOAD_TYPE_DOUBLE:
      payload = format("double %.17g", a->payload.dValue);
      break;
    case NVTX_PAYLOAD_TYPE_FLOAT:
      payload = format("float %.9g", static_cast<double>(a->payload.fValue));
      break;
    case NVTX_PAYLOAD_UNKNOWN:
      payload = "none 0";
      break;
    default:
      payload = format("other%d 0", a->payloadType);
  }
  std::string message;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_REGISTERED:
      message = format("registered %" PRIuPTR, id_of(a->message.registered));
      break;
    case NVTX_MESSAGE_TYPE_ASCII:
      message = "ascii " + one_line(a->message.ascii);
      break;
    case NVTX_MESSAGE_UNKNOWN:
      message = "none -";
      break;
    default:
      message = format("other%d -", a->messageType);
  }
  const unsigned color = a->colorType == NVTX_COLOR_ARGB ? a->color & 0xFFFFFFu : 0u;
  return format("%" PRIu32 " 0x%06x ", a->category, color) + payload + " " + message;
}

// ---- Core module: the global domain ----

int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  write_line(format("push %" PRIu32 " 0 ", current_tid()) + describe(a));
  return 0;
}

int NVTX_API range_push_a(const char* message) {
  write_line(format("push %" PRIu32 " 0 0 0x000000 none 0 ascii ", current_tid()) +
             one_line(message));
  return 0;
}

int NVTX_API range_pop() {
  write_line(format("pop %" PRIu32 " 0", current_tid()));
  return 0;
}

void NVTX_API name_category_a(uint32_t category, const char* name) {
  write_line(format("category %" PRIu32 " 0 %" PRIu32 " ", current_tid(), category) +
             one_line(name));
}

void NVTX_API name_os_thread_a(uint32_t thread_id, const char* name) {
  write_line(format("thread %" PRIu32 " %" PRIu32 " ", current_tid(), thread_id) + one_line(name));
}

// ---- Core2 module: domains ----

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  const auto handle = new_handle<nvtxDomainHandle_t>();
  write_line(format("domain %" PRIu32 " %" PRIuPTR " ", current_tid(), id_of(handle)) +
             one_line(name));
  return handle;
}

void NVTX_API domain_destroy(nvtxDomainHandle_t) {}

nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t domain, const char* text) {
  const auto handle = new_handle<nvtxStringHandle_t>();
  write_line(format("string %" PRIu32 " %" PRIuPTR " %" PRIuPTR " ", current_tid(), id_of(domain),
                    id_of(handle)) +
             one_line(text));
  return handle;
}

void NVTX_API domain_name_category_a(nvtxDomainHandle_t domain, uint32_t category,
                                     const char* name) {
  write_line(format("category %" PRIu32 " %" PRIuPTR " %" PRIu32 " ", current_tid(), id_of(domain),
                    category) +
             one_line(name));
}

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  write_line(format("push %" PRIu32 " %" PRIuPTR " ", current_tid(), id_of(domain)) + describe(a));
  return 0;
}

int NVTX_API domain_range_pop(nvtxDomainHandle_t domain) {
  write_line(format("pop %" PRIu32 " %" PRIuPTR, current_tid(), id_of(domain)));
  return 0;
}

// Points slot `id` of NVTX's table for one module at `fn`; false when the table is shorter
// (an NVTX older than these headers).
template <class Fn>
bool assign(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (id > size || table[id] == nullptr) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const char* path = std::getenv("SCALESCOPE_NVTX_LOG");
  if (path == nullptr || *path == '\0') return 0;  // 0: NVTX makes every call a no-op
  g_fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_fd < 0) return 0;

  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;

  NvtxFunctionTable core = nullptr;
  unsigned core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
      callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) {
    return 0;
  }
  bool ok = true;
  ok &= assign(core, core_size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
  ok &= assign(core, core_size, NVTX_CBID_CORE_RangePushA, &range_push_a);
  ok &= assign(core, core_size, NVTX_CBID_CORE_RangePop, &range_pop);
  ok &= assign(core, core_size, NVTX_CBID_CORE_NameCategoryA, &name_category_a);
  ok &= assign(core, core_size, NVTX_CBID_CORE_NameOsThreadA, &name_os_thread_a);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string_a);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, &domain_name_category_a);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex);
  ok &= assign(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
  if (!ok) return 0;
  write_line(format("init %" PRIu32, current_tid()));
  return 1;
}
