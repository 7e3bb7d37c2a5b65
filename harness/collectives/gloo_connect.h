// Connecting a Gloo context so that no wait of the connection outlasts the collective timeout.
//
// A Gloo TCP pair waits for its connection five times the context's timeout (Pair::waitUntil
// in gloo/transport/tcp/pair.h), and nothing else wakes it: with a peer killed after it
// published its address, a 20 s collective timeout left the survivor waiting 100 s in
// Pair::connect, and the process exit waited for that thread. The pairs are therefore
// created with a fifth of the timeout, which bounds their connect by the timeout itself, and
// the context gets the whole timeout back for what follows. In the asynchronous mode used here
// a pair's own timeout serves only its connection (the collectives pass theirs explicitly).
#pragma once

#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace scalescope {

// The pairs' timeout while connecting: five of them make `timeout`.
inline std::chrono::milliseconds gloo_pair_connect_timeout(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(1), timeout / 5);
}

// A Gloo TCP pair sends with writev, which raises SIGPIPE when the peer's process has died, and
// SIGPIPE's default action killed the survivor (status 141) before Gloo could report the lost
// peer. Ignored, the write fails with EPIPE and the collective throws, naming the peer.
inline void ignore_broken_pipe_signal() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

// Returns once every rank has connected: connectFullMesh returns when this rank's pairs are
// up, and a rank that then left at once (its replica done or failed) closed them while a peer
// was still finishing its handshake, which failed with "Connection closed by peer" (one
// two-rank connect in ten here). A barrier over the new pairs closes that window.
// REQUIRES: `store` waits for keys with a timeout of its own (the context's is a fifth of
// `timeout` while connecting).
inline void connect_full_mesh(const std::shared_ptr<gloo::rendezvous::Context>& context,
                              gloo::rendezvous::Store& store,
                              std::shared_ptr<gloo::transport::Device> device,
                              std::chrono::milliseconds timeout) {
  ignore_broken_pipe_signal();
  context->setTimeout(gloo_pair_connect_timeout(timeout));
  context->connectFullMesh(store, device);
  context->setTimeout(timeout);
  gloo::BarrierOptions everyone(context);
  everyone.setTimeout(timeout);
  gloo::barrier(everyone);
}

}  // namespace scalescope
