#include "harness/collectives/network.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/check.h"

namespace scalescope {
namespace {

// The numeric text of an IPv4 or IPv6 socket address; nullopt for other families.
std::optional<std::string> numeric_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address == nullptr) return std::nullopt;
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return text;
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return text;
  }
  return std::nullopt;
}

// The text in canonical form when it is a numeric IPv4 or IPv6 address ("::0001" and "::1"
// are the same address), nullopt otherwise.
std::optional<std::string> canonical_address(const std::string& text) {
  in6_addr bytes{};
  char out[INET6_ADDRSTRLEN] = {};
  for (const int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), &bytes) == 1 &&
        inet_ntop(family, &bytes, out, sizeof(out)) != nullptr) {
      return out;
    }
  }
  return std::nullopt;
}

// The interface holding `address` (canonical text), or nullptr.
const LocalInterface* holder_of(const std::string& address,
                                const std::vector<LocalInterface>& interfaces) {
  for (const LocalInterface& i : interfaces) {
    for (const std::string& a : i.addresses) {
      if (canonical_address(a) == address) return &i;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<LocalInterface> local_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    throw Error("libc", "getifaddrs", std::strerror(errno));
  }
  std::vector<LocalInterface> out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    // getifaddrs lists an interface once per address, and once more (AF_PACKET) per link.
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const LocalInterface& i) { return i.name == a->ifa_name; });
    if (it == out.end())
      it = out.insert(out.end(), LocalInterface{.name = a->ifa_name, .addresses = {}});
    if (const std::optional<std::string> text = numeric_text(a->ifa_addr)) {
      it->addresses.push_back(*text);
    }
  }
  freeifaddrs(list);
  return out;
}

std::string describe_interfaces(const std::vector<LocalInterface>& interfaces) {
  if (interfaces.empty()) return "none";
  std::vector<std::string> parts;
  for (const LocalInterface& i : interfaces) {
    parts.push_back(i.addresses.empty()
                        ? fmt::format("{} (no address)", i.name)
                        : fmt::format("{} ({})", i.name, fmt::join(i.addresses, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

NetworkChoice resolve_network_choice(const std::string& choice, const std::string& chosen_by,
                                     const std::string& host,
                                     const std::vector<LocalInterface>& interfaces) {
  NetworkChoice out;
  out.info.chosen_by = chosen_by;
  const auto named = std::find_if(interfaces.begin(), interfaces.end(),
                                  [&](const LocalInterface& i) { return i.name == choice; });
  if (named != interfaces.end()) {
    // Gloo binds to the interface's first address; without one it could not bind at all.
    SS_CHECK_INPUT(!named->addresses.empty(),
                   "{} {}: the interface exists on {} but has no IPv4 or IPv6 address; interfaces "
                   "there: {}",
                   chosen_by, choice, host, describe_interfaces(interfaces));
    out.iface = choice;
    out.info.interface = choice;
    out.info.address = named->addresses.front();
    return out;
  }
  const std::optional<std::string> address = canonical_address(choice);
  const LocalInterface* holder = address ? holder_of(*address, interfaces) : nullptr;
  SS_CHECK_INPUT(holder != nullptr,
                 "{} {}: {} has no network interface {} '{}'; interfaces there: {} (name one of "
                 "them or one of their addresses)",
                 chosen_by, choice, host, address ? "with the address" : "named", choice,
                 describe_interfaces(interfaces));
  out.hostname = *address;
  out.info.interface = holder->name;
  out.info.address = *address;
  return out;
}

NetworkChoice network_by_host_name(const std::string& host,
                                   const std::vector<LocalInterface>& interfaces) {
  NetworkChoice out;
  out.hostname = host;
  out.info.chosen_by = "host name";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // Gloo would bind to a name that does not resolve and crash inside its device setup.
  if (const int status = getaddrinfo(host.c_str(), nullptr, &hints, &found); status != 0) {
    throw_error(fmt::format(
        "this host's name '{}' does not resolve ({}), and the processes' Gloo connections bind "
        "to it unless told otherwise: give --network-interface (or GLOO_SOCKET_IFNAME) one of "
        "the interfaces here: {}",
        host, gai_strerror(status), describe_interfaces(interfaces)));
  }
  // Gloo binds to the first address the name resolves to.
  if (const std::optional<std::string> text = numeric_text(found->ai_addr)) {
    out.info.address = *text;
    if (const LocalInterface* holder = holder_of(*text, interfaces)) {
      out.info.interface = holder->name;
    }
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace scalescope
