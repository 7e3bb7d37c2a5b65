// Which network a multi-process run's Gloo devices (the control channel and the replicas'
// collectives) bind to, as NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME users expect: an
// interface by name, or one of this host's addresses; by default the address the host name
// resolves to. A choice that names nothing on this host is refused with the interfaces that
// do exist, before any process waits on a connection that cannot be made.
#pragma once

#include <string>
#include <vector>

#include "reports/environment.h"

namespace scalescope {

// One network interface of this host and its IPv4 and IPv6 addresses (numeric text).
struct LocalInterface {
  std::string name;
  std::vector<std::string> addresses;
  bool operator==(const LocalInterface&) const = default;
};

// This host's interfaces (getifaddrs), in the order the kernel lists them; only IPv4 and
// IPv6 addresses. Throws Error when getifaddrs fails.
std::vector<LocalInterface> local_interfaces();

// "lo (127.0.0.1, ::1), eth0 (10.0.0.5)"; an interface without an address says so.
std::string describe_interfaces(const std::vector<LocalInterface>& interfaces);

// What the Gloo devices of this process bind to.
struct NetworkChoice {
  // The interface name for Gloo's `iface`; empty when binding by address.
  std::string iface;
  // The host name or address for Gloo's `hostname` when `iface` is empty.
  std::string hostname;
  // What the report's environment records.
  NetworkInfo info;
};

// Resolves `choice`, named by `chosen_by` ("--network-interface", "GLOO_SOCKET_IFNAME") in
// errors, on the host `host` whose interfaces are `interfaces`: an interface name (it must
// have an address) or a numeric address one of them holds. Throws Error naming the choice,
// the host and every interface there is, otherwise. REQUIRES: choice is not empty.
NetworkChoice resolve_network_choice(const std::string& choice, const std::string& chosen_by,
                                     const std::string& host,
                                     const std::vector<LocalInterface>& interfaces);

// The default: bind by `host`'s name. The record names the address it resolves to and the
// interface holding it when they can be found ("" otherwise). Throws Error naming the host and
// the interfaces to choose from when the name does not resolve.
NetworkChoice network_by_host_name(const std::string& host,
                                   const std::vector<LocalInterface>& interfaces);

}  // namespace scalescope
