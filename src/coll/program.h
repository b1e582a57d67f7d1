// Collectives as flow programs: each rank's part of a collective is a small state machine that issues
// point-to-point messages when its dependencies are met; the executor (coll/executor.h) turns messages
// into flows of the flow-level network, so overlap, pipelining and contention come out of the run.
//
// The interface is per rank and message ids are rank-relative ("step 3, chunk 1", never "rank 17's
// step 3"), so that a symmetric execution can simulate only representative ranks and translate the
// others' messages to them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "coll/collective.h"
#include "core/units.h"

namespace orrery::coll {

// The switch pseudo-rank. A message to kSwitch ends at the first switch on the sender's routes (it
// crosses only the sender's link into that switch); a message from kSwitch starts there and crosses
// only the last link into its destination. That is an in-switch reduction or multicast (NVLink SHARP,
// NCCL's NVLS: the switch sums what the ranks push into it and copies what one rank stores to all of
// them). A message's arrival at the switch is delivered as on_receive(kSwitch, src, id); messages from
// the switch get no on_send_done. Every rank of such a program must reach the others through one switch
// (PathProvider::switch_path checks it).
inline constexpr int32_t kSwitch = -1;

// Where a program's messages go.
//
// A connection is (src, dst, stream): messages on one connection drain in FIFO order (the next one's
// bytes start when the previous one's have drained, while its latency overlaps), as on an NCCL
// channel's connection; different streams (channels, trees) run side by side and share links fairly.
class Issuer {
 public:
  virtual ~Issuer() = default;
  virtual void send(int32_t src, int32_t dst, Bytes size, uint64_t id, uint32_t stream = 0) = 0;
};

class Program {
 public:
  virtual ~Program() = default;
  virtual int32_t ranks() const = 0;
  // Issues rank's first messages.
  virtual void start(int32_t rank, Issuer& out) = 0;
  // rank's message `id` to `dst` has been delivered (rank's send buffer is free).
  virtual void on_send_done(int32_t rank, int32_t dst, uint64_t id, Issuer& out) = 0;
  // Message `id` from `src` has fully arrived at rank.
  virtual void on_receive(int32_t rank, int32_t src, uint64_t id, Issuer& out) = 0;
  // Number of messages each rank sends in total (for checks and progress).
  virtual uint64_t messages_per_rank() const = 0;
  // In-switch programs (kSwitch): the rank whose switch `rank` must share (a route of two links through
  // one switch joins them). Default: rank 0 (rank 1 for rank 0), so every rank meets at one switch;
  // several programs run as one (one per machine) name a member of each rank's own program. -1: none.
  virtual int32_t switch_peer(int32_t rank) const { return ranks() < 2 ? -1 : (rank == 0 ? 1 : 0); }
  // True when shifting every rank by `period` (r -> r + period mod n) maps the program onto itself:
  // the same messages, ids and dependencies, shifted. Symmetric execution needs it.
  virtual bool shift_equivariant(int32_t /*period*/) const { return false; }
};

struct ProgramOptions {
  int32_t channels = 1;           // parallel rings (NCCL channels); each carries size/channels
  Bytes chunk = Bytes::KiB(512);  // pipelining granularity (NCCL: buffer 4 MiB / 8 steps)
  int32_t max_outstanding = 8;    // messages in flight per connection (NCCL_STEPS slots)
  int32_t root = 0;               // broadcast / reduce / send-recv source
  int32_t peer = 1;               // send-recv destination
  int32_t ranks_per_node = 0;     // hierarchical: group size g (0: the whole job is one node)
};

// Builds the program of `op` with `algo` (not kAuto) over n ranks and nccl-tests buffer size `size`.
// Throws InputError when the algorithm does not implement the op or n/options are invalid.
std::unique_ptr<Program> make_program(Op op, Algorithm algo, int32_t n, Bytes size, const ProgramOptions& options);

}  // namespace orrery::coll
