// The flow programs of coll/program.h. Each program is a per-rank state machine; see the comment on
// each class for its message order and dependencies.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "coll/program.h"
#include "core/assert.h"

namespace orrery::coll {
namespace {

int64_t chunks_for(Bytes block, Bytes chunk) {
  if (block.count() <= 0) return 1;
  return std::max<int64_t>(1, (block.count() + chunk.count() - 1) / chunk.count());
}

// ---------------------------------------------------------------------------------------------------
// Phased rings. A phase partitions the ranks into groups, each a ring; every rank performs `steps`
// ring steps per phase, each step moving one block, split into `chunks` pipelined messages, to its
// successor. Message m = (step s, chunk j) of channel c may leave a rank when
//   - the rank has finished every earlier phase,
//   - fewer than max_outstanding of its messages on (phase, c) are in flight (NCCL_STEPS slots), and
//   - s == 0, or message (s-1, j) of (phase, c) has arrived from its predecessor.
// Ring all-reduce = one phase of 2(n-1) steps (reduce-scatter then all-gather); all-gather and
// reduce-scatter = n-1 steps. Hierarchical all-reduce = intra-node reduce-scatter, inter-node
// all-reduce of S/g among ranks of equal local index (one ring per rail), intra-node all-gather
// (Thakur et al. 2005; NCCL's "ring" across nodes with rails, and its CollNet-style hierarchy).
enum class RingKind {
  kFlat,   // one ring over all n ranks; channel c visits each node's ranks as c, c+1, ... (mod g) and
           // leaves the node from local rank c-1 to the next node's local rank c, so channels cross
           // node boundaries through different GPUs (and NICs)
  kIntra,  // one ring per node over its g ranks
  kRail,   // one ring per local index over the m nodes (rail-aligned)
};
struct Phase {
  RingKind kind = RingKind::kFlat;
  int64_t steps = 0;
  Bytes block;             // bytes per step per channel
  int64_t chunks = 1;
};

class PhasedRing final : public Program {
 public:
  PhasedRing(int32_t n, int32_t g, int32_t channels, Bytes chunk, int32_t max_outstanding, std::vector<Phase> phases)
      : n_(n), g_(g), channels_(channels), max_outstanding_(static_cast<uint32_t>(max_outstanding)), phases_(std::move(phases)) {
    for (Phase& p : phases_) p.chunks = chunks_for(p.block, chunk);
    const size_t cells = static_cast<size_t>(n_) * phases_.size() * static_cast<size_t>(channels_);
    sent_.assign(cells, 0);
    recv_.assign(cells, 0);
    issued_.assign(cells, 0);
    phase_of_.assign(static_cast<size_t>(n_), 0);
    for (const Phase& p : phases_) per_rank_ += static_cast<uint64_t>(p.steps * p.chunks * channels_);
  }

  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override { return per_rank_; }
  // Every ring kind maps node i to node i+1 under a shift by g ranks (kFlat rotates each node's order
  // by the channel, the same in every node).
  bool shift_equivariant(int32_t period) const override { return period > 0 && period % g_ == 0 && n_ % period == 0; }

  void start(int32_t rank, Issuer& out) override { advance(rank, out); }

  void on_send_done(int32_t rank, int32_t /*dst*/, uint64_t id, Issuer& out) override {
    const auto [phase, channel] = decode(id);
    ++sent_[cell(rank, phase, channel)];
    advance(rank, out);
  }

  void on_receive(int32_t rank, int32_t /*src*/, uint64_t id, Issuer& out) override {
    const auto [phase, channel] = decode(id);
    ++recv_[cell(rank, phase, channel)];
    advance(rank, out);
  }

 private:
  // id = ((phase * channels + channel) << 40) | (step * chunks + chunk)
  static constexpr int kIndexBits = 40;
  std::pair<size_t, int32_t> decode(uint64_t id) const {
    const uint64_t pc = id >> kIndexBits;
    return {static_cast<size_t>(pc / static_cast<uint64_t>(channels_)), static_cast<int32_t>(pc % static_cast<uint64_t>(channels_))};
  }
  size_t cell(int32_t rank, size_t phase, int32_t channel) const {
    return (static_cast<size_t>(rank) * phases_.size() + phase) * static_cast<size_t>(channels_) + static_cast<size_t>(channel);
  }

  // The successor of `rank` in its ring of `phase` on `channel` (see RingKind).
  int32_t ring_successor(int32_t rank, size_t phase, int32_t channel) const {
    const int32_t node = rank / g_;
    const int32_t local = rank % g_;
    const int32_t nodes = n_ / g_;
    switch (phases_[phase].kind) {
      case RingKind::kFlat: {
        if (nodes == 1) return (rank + 1) % n_;
        const int32_t c = channel % g_;
        const int32_t last = (c + g_ - 1) % g_;
        if (local == last) return ((node + 1) % nodes) * g_ + c;
        return node * g_ + (local + 1) % g_;
      }
      case RingKind::kIntra: return node * g_ + (local + 1) % g_;
      case RingKind::kRail: return ((node + 1) % nodes) * g_ + local;
    }
    return rank;
  }

  bool phase_complete(int32_t rank, size_t phase) const {
    const Phase& p = phases_[phase];
    const uint32_t total = static_cast<uint32_t>(p.steps * p.chunks);
    for (int32_t c = 0; c < channels_; ++c) {
      const size_t k = cell(rank, phase, c);
      if (sent_[k] < total || recv_[k] < total) return false;
    }
    return true;
  }

  void advance(int32_t rank, Issuer& out) {
    size_t& phase = phase_of_[static_cast<size_t>(rank)];
    while (phase < phases_.size()) {
      const Phase& p = phases_[phase];
      const uint32_t total = static_cast<uint32_t>(p.steps * p.chunks);
      for (int32_t c = 0; c < channels_; ++c) {
        const size_t k = cell(rank, phase, c);
        // Issue messages in order while slots are free and each one's input has arrived.
        for (;;) {
          const uint32_t m = issued_[k];
          if (m >= total || m >= sent_[k] + max_outstanding_) break;
          const int64_t s = m / p.chunks;
          const int64_t j = m % p.chunks;
          const bool ready = s == 0 || recv_[k] >= static_cast<uint32_t>((s - 1) * p.chunks + j + 1);
          if (!ready) break;
          issued_[k] = m + 1;
          const uint64_t id =
              ((static_cast<uint64_t>(phase) * static_cast<uint64_t>(channels_) + static_cast<uint64_t>(c)) << kIndexBits) | m;
          out.send(rank, ring_successor(rank, phase, c), chunk_bytes(p, j), id, static_cast<uint32_t>(c));
        }
      }
      if (!phase_complete(rank, phase)) return;
      ++phase;
    }
  }

  Bytes chunk_bytes(const Phase& p, int64_t j) const {
    // Split the block into `chunks` nearly equal messages (the first ones take the remainder).
    const int64_t base = p.block.count() / p.chunks;
    const int64_t rem = p.block.count() % p.chunks;
    return Bytes(base + (j < rem ? 1 : 0));
  }

  int32_t n_;
  int32_t g_;
  int32_t channels_;
  uint32_t max_outstanding_;
  std::vector<Phase> phases_;
  std::vector<uint32_t> sent_;
  std::vector<uint32_t> recv_;
  std::vector<uint32_t> issued_;  // messages issued per (rank, phase, channel); issued - sent are in flight
  std::vector<size_t> phase_of_;
  uint64_t per_rank_ = 0;
};

std::unique_ptr<Program> make_phased(int32_t n, int32_t g, const ProgramOptions& o, std::vector<Phase> phases) {
  return std::make_unique<PhasedRing>(n, g, o.channels, o.chunk, o.max_outstanding, std::move(phases));
}

// ---------------------------------------------------------------------------------------------------
// Pipelined trees over explicit shapes. Each tree gives every rank a parent (-1 at the root) and its
// children; the data is split evenly over the trees, then into chunks. Reduce: a rank sends chunk j
// to its parent once it has chunk j from every child (up to max_outstanding chunks in flight per
// connection). Broadcast: a rank forwards chunk j to each child once it has it. All-reduce = reduce,
// then the root turns each reduced chunk around into the broadcast.
//
// Shapes (make_tree_shapes below):
//  - NCCL's tree (Jeaugey, "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019; NCCL
//    src/graph/trees.cc): inside each node a chain of its g ranks; between nodes a double binary tree
//    over the m nodes (tree 0 heap-shaped over node order, tree 1 over the mirrored order, so that a
//    node that is inner in one is mostly a leaf in the other). Each node joins the node tree through its
//    chain head; tree 0's chains run up from local rank c, tree 1's down from local rank c-1 (channel c),
//    so the two trees and the channels leave a node through different GPUs and NICs. One node: a chain.
//  - Broadcast and reduce use the single tree 0 rooted at the root rank's node.
struct TreeShape {
  std::vector<int32_t> parent;                 // per rank, -1 for the root
  std::vector<std::vector<int32_t>> children;  // per rank
};

enum class TreeMode { kReduce, kBroadcast, kAllReduce };

class TreeProgram final : public Program {
 public:
  TreeProgram(int32_t n, std::vector<TreeShape> trees, TreeMode mode, Bytes size, Bytes chunk, int32_t max_outstanding)
      : n_(n), trees_(std::move(trees)), mode_(mode), max_out_(static_cast<uint32_t>(max_outstanding)) {
    const int64_t t = static_cast<int64_t>(trees_.size());
    const Bytes per_tree(size.count() / t);
    chunks_ = static_cast<uint32_t>(chunks_for(per_tree, chunk));
    chunk_size_ = Bytes(std::max<int64_t>(per_tree.count() / chunks_, per_tree.count() > 0 ? 1 : 0));
    const size_t cells = static_cast<size_t>(n_) * trees_.size();
    up_recv_.assign(cells * chunks_, 0);
    up_sent_.assign(cells, 0);
    up_issued_.assign(cells, 0);
    down_have_.assign(cells, 0);
    child_offset_.assign(cells + 1, 0);
    for (size_t tr = 0; tr < trees_.size(); ++tr) {
      for (int32_t r = 0; r < n_; ++r) {
        const size_t k = cell(r, static_cast<int32_t>(tr));
        child_offset_[k + 1] = static_cast<uint32_t>(trees_[tr].children[static_cast<size_t>(r)].size());
      }
    }
    for (size_t k = 0; k < cells; ++k) child_offset_[k + 1] += child_offset_[k];
    down_sent_.assign(child_offset_[cells], 0);
    down_issued_.assign(child_offset_[cells], 0);
  }

  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override {
    const uint64_t c = static_cast<uint64_t>(chunks_) * trees_.size();
    return mode_ == TreeMode::kAllReduce ? 4 * c : 3 * c;  // upper bound (inner ranks)
  }

  void start(int32_t rank, Issuer& out) override {
    for (int32_t t = 0; t < static_cast<int32_t>(trees_.size()); ++t) {
      if (mode_ == TreeMode::kBroadcast && parent(rank, t) < 0) down_have_[cell(rank, t)] = chunks_;
      progress(rank, t, out);
    }
  }

  void on_send_done(int32_t rank, int32_t dst, uint64_t id, Issuer& out) override {
    const Msg m = decode(id);
    if (m.up) {
      ++up_sent_[cell(rank, m.tree)];
    } else {
      ++down_sent_[child_offset_[cell(rank, m.tree)] + child_slot(rank, dst, m.tree)];
    }
    progress(rank, m.tree, out);
  }

  void on_receive(int32_t rank, int32_t /*src*/, uint64_t id, Issuer& out) override {
    const Msg m = decode(id);
    if (m.up) {
      ++up_recv_[cell(rank, m.tree) * chunks_ + static_cast<size_t>(m.chunk)];
    } else {
      ++down_have_[cell(rank, m.tree)];
    }
    progress(rank, m.tree, out);
  }

 private:
  struct Msg {
    int32_t tree;
    bool up;
    int64_t chunk;
  };
  // id = tree << 41 | up << 40 | chunk
  static uint64_t encode(int32_t tree, bool up, int64_t chunk) {
    return (static_cast<uint64_t>(tree) << 41) | (static_cast<uint64_t>(up) << 40) | static_cast<uint64_t>(chunk);
  }
  static Msg decode(uint64_t id) {
    return Msg{static_cast<int32_t>(id >> 41), ((id >> 40) & 1) != 0, static_cast<int64_t>(id & ((uint64_t{1} << 40) - 1))};
  }
  size_t cell(int32_t rank, int32_t tree) const {
    return static_cast<size_t>(rank) * trees_.size() + static_cast<size_t>(tree);
  }
  int32_t parent(int32_t rank, int32_t t) const { return trees_[static_cast<size_t>(t)].parent[static_cast<size_t>(rank)]; }
  const std::vector<int32_t>& kids(int32_t rank, int32_t t) const {
    return trees_[static_cast<size_t>(t)].children[static_cast<size_t>(rank)];
  }
  uint32_t child_slot(int32_t rank, int32_t child, int32_t t) const {
    const auto& k = kids(rank, t);
    return static_cast<uint32_t>(std::find(k.begin(), k.end(), child) - k.begin());
  }

  void progress(int32_t rank, int32_t t, Issuer& out) {
    const size_t k = cell(rank, t);
    const int32_t up = parent(rank, t);
    const auto& children = kids(rank, t);
    const auto nkids = static_cast<uint32_t>(children.size());
    const bool reduce = mode_ != TreeMode::kBroadcast;
    const auto stream_up = static_cast<uint32_t>(2 * t);
    const auto stream_down = static_cast<uint32_t>(2 * t + 1);
    if (reduce && up >= 0) {
      for (uint32_t m = up_issued_[k]; m < chunks_ && m < up_sent_[k] + max_out_ && up_recv_[k * chunks_ + m] >= nkids;
           m = up_issued_[k]) {
        up_issued_[k] = m + 1;
        out.send(rank, up, chunk_size_, encode(t, true, m), stream_up);
      }
    }
    if (mode_ == TreeMode::kAllReduce && up < 0) {
      uint32_t have = down_have_[k];
      while (have < chunks_ && up_recv_[k * chunks_ + have] >= nkids) ++have;
      down_have_[k] = have;
    }
    if (mode_ != TreeMode::kReduce) {
      for (uint32_t slot = 0; slot < nkids; ++slot) {
        const size_t d = child_offset_[k] + slot;
        for (uint32_t m = down_issued_[d]; m < chunks_ && m < down_sent_[d] + max_out_ && down_have_[k] > m;
             m = down_issued_[d]) {
          down_issued_[d] = m + 1;
          out.send(rank, children[slot], chunk_size_, encode(t, false, m), stream_down);
        }
      }
    }
  }

  int32_t n_;
  std::vector<TreeShape> trees_;
  TreeMode mode_;
  uint32_t max_out_;
  uint32_t chunks_ = 1;
  Bytes chunk_size_;
  std::vector<uint32_t> up_recv_;  // per (rank, tree, chunk): children heard from
  std::vector<uint32_t> up_sent_, up_issued_, down_have_;
  std::vector<uint32_t> child_offset_;  // per (rank, tree): first slot in down_sent_/down_issued_
  std::vector<uint32_t> down_sent_, down_issued_;
};

// Heap-shaped binary tree over `count` items listed in `order`: parent of position i is (i-1)/2.
void heap_links(const std::vector<int32_t>& order, std::vector<int32_t>& parent_of, std::vector<std::vector<int32_t>>& kids_of) {
  for (size_t i = 1; i < order.size(); ++i) {
    const int32_t p = order[(i - 1) / 2];
    parent_of[static_cast<size_t>(order[i])] = p;
    kids_of[static_cast<size_t>(p)].push_back(order[i]);
  }
}

// NCCL-style tree shapes (see above): `trees_per_channel` (1 or 2) trees for each of `channels`,
// nodes of g consecutive ranks, node-level trees rooted at `root_node`.
std::vector<TreeShape> make_tree_shapes(int32_t n, int32_t g, int32_t channels, int32_t trees_per_channel, int32_t root_node) {
  const int32_t m = n / g;
  std::vector<TreeShape> out;
  for (int32_t c = 0; c < channels; ++c) {
    for (int32_t t = 0; t < trees_per_channel; ++t) {
      TreeShape s;
      s.parent.assign(static_cast<size_t>(n), -1);
      s.children.assign(static_cast<size_t>(n), {});
      // Chain inside each node: order of local ranks from the head down the chain.
      std::vector<int32_t> local_order(static_cast<size_t>(g));
      for (int32_t i = 0; i < g; ++i) {
        local_order[static_cast<size_t>(i)] = t == 0 ? (c + i) % g : ((c + g - 1 - i) % g + g) % g;
      }
      for (int32_t node = 0; node < m; ++node) {
        for (int32_t i = 1; i < g; ++i) {
          const int32_t child = node * g + local_order[static_cast<size_t>(i)];
          const int32_t par = node * g + local_order[static_cast<size_t>(i - 1)];
          s.parent[static_cast<size_t>(child)] = par;
          s.children[static_cast<size_t>(par)].push_back(child);
        }
      }
      // Node-level binary tree over the chain heads; tree 1 mirrors the node order.
      std::vector<int32_t> heads(static_cast<size_t>(m));
      for (int32_t i = 0; i < m; ++i) {
        const int32_t rel = t == 0 ? i : (m - 1 - i);
        const int32_t node = (root_node + rel) % m;
        heads[static_cast<size_t>(i)] = node * g + local_order[0];
      }
      heap_links(heads, s.parent, s.children);
      out.push_back(std::move(s));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Recursive halving-doubling (Rabenseifner; Thakur et al. 2005), n a power of two. Reduce-scatter by
// recursive halving: at step k rank r exchanges S/2^(k+1) bytes with r XOR n/2^(k+1); all-gather by
// recursive doubling in the reverse order. A rank moves to the next step once its send was delivered
// and its partner's message of this step has arrived.
class HalvingDoubling final : public Program {
 public:
  HalvingDoubling(int32_t n, Bytes size, bool halve, bool dbl) : n_(n), size_(size) {
    int32_t l = 0;
    while ((1 << l) < n_) ++l;
    log_ = l;
    if (halve) {
      for (int32_t k = 0; k < log_; ++k) steps_.push_back(Step{n_ >> (k + 1), Bytes(size_.count() >> (k + 1))});
    }
    if (dbl) {
      for (int32_t k = log_ - 1; k >= 0; --k) steps_.push_back(Step{n_ >> (k + 1), Bytes(size_.count() >> (k + 1))});
    }
    step_.assign(static_cast<size_t>(n_), 0);
    sent_.assign(static_cast<size_t>(n_), 0);
    got_.assign(static_cast<size_t>(n_) * steps_.size(), 0);
  }
  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override { return steps_.size(); }
  void start(int32_t rank, Issuer& out) override { issue(rank, out); }
  void on_send_done(int32_t rank, int32_t, uint64_t, Issuer& out) override {
    sent_[static_cast<size_t>(rank)] = 1;
    maybe_next(rank, out);
  }
  void on_receive(int32_t rank, int32_t, uint64_t id, Issuer& out) override {
    got_[static_cast<size_t>(rank) * steps_.size() + id] = 1;
    maybe_next(rank, out);
  }

 private:
  struct Step {
    int32_t distance;
    Bytes bytes;
  };
  void issue(int32_t rank, Issuer& out) {
    const size_t s = step_[static_cast<size_t>(rank)];
    if (s >= steps_.size()) return;
    sent_[static_cast<size_t>(rank)] = 0;
    out.send(rank, rank ^ steps_[s].distance, steps_[s].bytes, s);
  }
  void maybe_next(int32_t rank, Issuer& out) {
    const size_t r = static_cast<size_t>(rank);
    const size_t s = step_[r];
    if (s < steps_.size() && sent_[r] != 0 && got_[r * steps_.size() + s] != 0) {
      ++step_[r];
      issue(rank, out);
    }
  }
  int32_t n_;
  Bytes size_;
  int32_t log_ = 0;
  std::vector<Step> steps_;
  std::vector<size_t> step_;
  std::vector<uint8_t> sent_;
  std::vector<uint8_t> got_;
};

// ---------------------------------------------------------------------------------------------------
// Pipelined chain (ring broadcast/reduce): positions 0..n-1 starting at the root; broadcast forwards
// chunk j down the chain once received and the previous forward was delivered; reduce runs the chain
// backwards towards the root.
class ChainProgram final : public Program {
 public:
  ChainProgram(int32_t n, int32_t root, bool towards_root, Bytes size, Bytes chunk, int32_t max_outstanding)
      : n_(n), root_(root), towards_root_(towards_root), max_out_(static_cast<uint32_t>(max_outstanding)) {
    chunks_ = static_cast<uint32_t>(chunks_for(size, chunk));
    chunk_size_ = Bytes(size.count() / chunks_);
    have_.assign(static_cast<size_t>(n_), 0);
    sent_.assign(static_cast<size_t>(n_), 0);
    issued_.assign(static_cast<size_t>(n_), 0);
  }
  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override { return chunks_; }
  void start(int32_t rank, Issuer& out) override {
    if (position(rank) == 0) have_[static_cast<size_t>(rank)] = chunks_;
    progress(rank, out);
  }
  void on_send_done(int32_t rank, int32_t, uint64_t, Issuer& out) override {
    ++sent_[static_cast<size_t>(rank)];
    progress(rank, out);
  }
  void on_receive(int32_t rank, int32_t, uint64_t, Issuer& out) override {
    ++have_[static_cast<size_t>(rank)];
    progress(rank, out);
  }

 private:
  // Position along the direction of data flow: 0 starts.
  int32_t position(int32_t rank) const {
    const int32_t rel = (rank - root_ + n_) % n_;
    return towards_root_ ? n_ - 1 - rel : rel;
  }
  int32_t next(int32_t rank) const {
    if (towards_root_) {
      const int32_t rel = (rank - root_ + n_) % n_;
      return (root_ + (rel - 1 + n_)) % n_;  // rel-1, and rel 1 -> root
    }
    return (rank + 1) % n_;
  }
  void progress(int32_t rank, Issuer& out) {
    const size_t r = static_cast<size_t>(rank);
    if (position(rank) == n_ - 1) return;  // the chain's end keeps what it receives
    for (uint32_t m = issued_[r]; m < chunks_ && m < sent_[r] + max_out_ && have_[r] > m; m = issued_[r]) {
      issued_[r] = m + 1;
      out.send(rank, next(rank), chunk_size_, m);
    }
  }
  int32_t n_;
  int32_t root_;
  bool towards_root_;
  uint32_t max_out_;
  uint32_t chunks_ = 1;
  Bytes chunk_size_;
  std::vector<uint32_t> have_, sent_, issued_;
};

// Direct all-to-all: every rank sends S/n to each other rank at once (NCCL groups the n-1 sends and
// recvs of ncclAllToAll); message id = destination offset. Send/recv: one message root -> peer.
class DirectProgram final : public Program {
 public:
  DirectProgram(int32_t n, Bytes size, bool all_to_all, int32_t root, int32_t peer)
      : n_(n), size_(size), all_to_all_(all_to_all), root_(root), peer_(peer) {}
  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override { return all_to_all_ ? static_cast<uint64_t>(n_ - 1) : 1; }
  // All-to-all sends to (rank + d) mod n with id d: equivariant under any shift.
  bool shift_equivariant(int32_t period) const override { return all_to_all_ && period > 0 && n_ % period == 0; }
  void start(int32_t rank, Issuer& out) override {
    if (all_to_all_) {
      const Bytes each(size_.count() / n_);
      for (int32_t d = 1; d < n_; ++d) out.send(rank, (rank + d) % n_, each, static_cast<uint64_t>(d));
    } else if (rank == root_) {
      out.send(rank, peer_, size_, 0);
    }
  }
  void on_send_done(int32_t, int32_t, uint64_t, Issuer&) override {}
  void on_receive(int32_t, int32_t, uint64_t, Issuer&) override {}

 private:
  int32_t n_;
  Bytes size_;
  bool all_to_all_;
  int32_t root_;
  int32_t peer_;
};

// ---------------------------------------------------------------------------------------------------
// NVLink SHARP (NCCL's NVLS algorithm on Hopper and later NVSwitch systems): the switch reduces and
// multicasts (coll/program.h kSwitch). Rank j owns slice j (S/n bytes) of the buffer and works through
// it chunk by chunk, as NCCL's NVLS kernel does (its warps load-reduce a chunk, then store it):
//   reduce (all-reduce, reduce-scatter): j's multimem.ld_reduce of chunk (j, c) makes the switch read
//     every rank's copy (a push from each rank into the switch); when all n have arrived the switch
//     sends the sum down to j;
//   multicast (all-reduce, all-gather): j's multimem.st pushes the chunk (the sum, or its own data) up
//     and the switch copies it down to every rank, j included.
// The owner keeps at most max_outstanding chunks of its slice in flight (requested and not yet stored,
// or for reduce-scatter not yet summed back): the reads every rank serves are paced by the owners, so
// the reduction and the multicast stay in step on every link. Bytes per rank and direction: all-reduce
// S (n+1)/n each way; reduce-scatter S up, S/n down; all-gather S/n up, S down. On links of B per
// direction t -> S (n+1)/n / B for all-reduce and S / B for the other two, against the ring's
// 2(n-1)/n S / B and (n-1)/n S / B: NVLS is faster for all-reduce only (nccl-tests busbw
// 2(n-1)/(n+1) B, 1.56 B at n = 8, against the ring's B) and frees the SMs a ring spends on reductions.
class NvlsProgram final : public Program {
 public:
  NvlsProgram(int32_t n, Op op, Bytes size, Bytes chunk, int32_t max_outstanding)
      : n_(n), reduce_(op != Op::kAllGather), multicast_(op != Op::kReduceScatter), max_out_(static_cast<uint32_t>(max_outstanding)) {
    const Bytes slice(size.count() / n_);
    chunks_ = static_cast<uint32_t>(chunks_for(slice, chunk));
    chunk_size_ = Bytes(slice.count() / chunks_);
    requested_.assign(static_cast<size_t>(n_), 0);
    done_.assign(static_cast<size_t>(n_), 0);
    arrived_.assign(static_cast<size_t>(n_) * chunks_, 0);
  }
  int32_t ranks() const override { return n_; }
  uint64_t messages_per_rank() const override {
    return (reduce_ ? static_cast<uint64_t>(n_) * chunks_ : 0) + (multicast_ ? chunks_ : 0);
  }
  void start(int32_t rank, Issuer& out) override {
    if (n_ >= 2) request(rank, out);
  }
  void on_send_done(int32_t rank, int32_t /*dst*/, uint64_t id, Issuer& out) override {
    // The owner's store of a chunk has reached the switch: the chunk leaves its window.
    if (decode(id).phase == 1) finish(rank, out);
  }
  void on_receive(int32_t rank, int32_t /*src*/, uint64_t id, Issuer& out) override {
    const Decoded d = decode(id);
    if (rank == kSwitch) {
      if (d.phase == 0) {
        uint32_t& a = arrived_[static_cast<size_t>(d.slice) * chunks_ + d.chunk];
        if (++a == static_cast<uint32_t>(n_)) out.send(kSwitch, d.slice, chunk_size_, id, stream(0, d.slice));
      } else {
        for (int32_t r = 0; r < n_; ++r) out.send(kSwitch, r, chunk_size_, id, stream(1, d.slice));
      }
      return;
    }
    if (d.phase != 0) return;  // a multicast copy: final
    // A sum arrived at its owner: all-reduce stores it to every rank; reduce-scatter is done with it.
    if (multicast_) {
      out.send(rank, kSwitch, chunk_size_, encode(1, d.slice, d.chunk), stream(1, d.slice));
    } else {
      finish(rank, out);
    }
  }

 private:
  struct Decoded {
    uint32_t phase;  // 0: reduce, 1: multicast
    int32_t slice;
    uint32_t chunk;
  };
  static uint64_t encode(uint32_t phase, int32_t slice, uint32_t chunk) {
    return (static_cast<uint64_t>(phase) << 62) | (static_cast<uint64_t>(static_cast<uint32_t>(slice)) << 32) | chunk;
  }
  static Decoded decode(uint64_t id) {
    return {static_cast<uint32_t>(id >> 62), static_cast<int32_t>((id >> 32) & 0x3FFFFFFFu), static_cast<uint32_t>(id & 0xFFFFFFFFu)};
  }
  // Reduce traffic of slice j on stream j, multicast traffic on stream n + j: separate connections,
  // so that a store does not queue behind the reads of later chunks.
  uint32_t stream(uint32_t phase, int32_t slice) const { return phase * static_cast<uint32_t>(n_) + static_cast<uint32_t>(slice); }
  void finish(int32_t owner, Issuer& out) {
    ++done_[static_cast<size_t>(owner)];
    request(owner, out);
  }
  // Starts the owner's next chunks while its window has room: the reads of every rank's copy
  // (reduce), or the owner's own store (all-gather).
  void request(int32_t owner, Issuer& out) {
    const size_t j = static_cast<size_t>(owner);
    while (requested_[j] < chunks_ && requested_[j] < done_[j] + max_out_) {
      const uint32_t c = requested_[j]++;
      if (reduce_) {
        for (int32_t r = 0; r < n_; ++r) out.send(r, kSwitch, chunk_size_, encode(0, owner, c), stream(0, owner));
      } else {
        out.send(owner, kSwitch, chunk_size_, encode(1, owner, c), stream(1, owner));
      }
    }
  }
  int32_t n_;
  bool reduce_;
  bool multicast_;
  uint32_t max_out_;
  uint32_t chunks_ = 1;
  Bytes chunk_size_;
  std::vector<uint32_t> requested_, done_;  // per owner: chunks started, chunks out of the window
  std::vector<uint32_t> arrived_;           // per (slice, chunk): copies the switch has received
};

}  // namespace

std::unique_ptr<Program> make_program(Op op, Algorithm algo, int32_t n, Bytes size, const ProgramOptions& o) {
  const Where w{"", 0, "collective"};
  if (n < 1) throw InputError(w.with_key("ranks"), fmt::format("must be at least 1, got {}", n));
  if (size.count() < 0) throw InputError(w.with_key("size"), "must not be negative");
  if (o.channels < 1) throw InputError(w.with_key("channels"), "must be at least 1");
  if (o.chunk.count() < 1) throw InputError(w.with_key("chunk"), "must be positive");
  if (o.max_outstanding < 1) throw InputError(w.with_key("max_outstanding"), "must be at least 1");
  const auto algos = algorithms_for(op);
  if (std::find(algos.begin(), algos.end(), algo) == algos.end()) {
    std::string valid;
    for (Algorithm a : algos) valid += (valid.empty() ? "" : ", ") + std::string(algorithm_name(a));
    throw InputError(w.with_key("algorithm"), fmt::format("{} has no '{}' algorithm", op_name(op), algorithm_name(algo)),
                     "valid: " + valid);
  }
  const int32_t root = o.root;
  if (root < 0 || root >= n) throw InputError(w.with_key("root"), fmt::format("must be a rank in [0, {}), got {}", n, root));
  const int64_t ch = o.channels;
  switch (algo) {
    case Algorithm::kRing: {
      if (op == Op::kBroadcast || op == Op::kReduce) {
        return std::make_unique<ChainProgram>(n, root, op == Op::kReduce, size, o.chunk, o.max_outstanding);
      }
      const int64_t steps = op == Op::kAllReduce ? 2 * (n - 1) : (n - 1);
      const Bytes block(size.count() / n / ch);
      const int32_t g = o.ranks_per_node > 0 && n % o.ranks_per_node == 0 ? o.ranks_per_node : n;
      return make_phased(n, g, o, {Phase{RingKind::kFlat, steps, block, 1}});
    }
    case Algorithm::kHierarchical: {
      const int32_t g = o.ranks_per_node > 0 ? std::min(o.ranks_per_node, n) : n;
      if (n % g != 0) {
        throw InputError(w.with_key("ranks"), fmt::format("hierarchical needs whole nodes: {} ranks is not a multiple of {} per node", n, g));
      }
      const int32_t m = n / g;
      std::vector<Phase> phases;
      const Bytes intra_block(size.count() / g / ch);
      const Bytes inter_block(size.count() / g / m / ch);
      if (op == Op::kAllReduce || op == Op::kReduceScatter) phases.push_back(Phase{RingKind::kIntra, g - 1, intra_block, 1});
      if (m > 1) {
        const int64_t steps = op == Op::kAllReduce ? 2 * (m - 1) : (m - 1);
        phases.push_back(Phase{RingKind::kRail, steps, inter_block, 1});
      }
      if (op == Op::kAllReduce || op == Op::kAllGather) phases.push_back(Phase{RingKind::kIntra, g - 1, intra_block, 1});
      return make_phased(n, g, o, std::move(phases));
    }
    case Algorithm::kTree: {
      const TreeMode mode = op == Op::kAllReduce ? TreeMode::kAllReduce
                            : op == Op::kReduce  ? TreeMode::kReduce
                                                 : TreeMode::kBroadcast;
      const int32_t g = o.ranks_per_node > 0 && n % o.ranks_per_node == 0 ? o.ranks_per_node : n;
      if (mode == TreeMode::kAllReduce) {
        // Double binary tree between nodes (one tree when there is a single node), per channel.
        const int32_t per_channel = n / g > 1 ? 2 : 1;
        return std::make_unique<TreeProgram>(n, make_tree_shapes(n, g, static_cast<int32_t>(ch), per_channel, 0), mode,
                                             size, o.chunk, o.max_outstanding);
      }
      // Broadcast / reduce: one tree rooted at the root rank. Channel c's tree 0 starts each node's
      // chain at local rank c, so channel root % g puts the root at the head of its node's chain.
      const int32_t root_node = root / g;
      auto shapes = make_tree_shapes(n, g, root % g + 1, 1, root_node);
      shapes.erase(shapes.begin(), shapes.end() - 1);
      return std::make_unique<TreeProgram>(n, std::move(shapes), mode, size, o.chunk, o.max_outstanding);
    }
    case Algorithm::kHalvingDoubling: {
      if ((n & (n - 1)) != 0) {
        throw InputError(w.with_key("ranks"),
                         fmt::format("halving-doubling needs a power-of-two rank count, got {}", n), "use ring or tree");
      }
      const bool halve = op != Op::kAllGather;
      const bool dbl = op != Op::kReduceScatter;
      return std::make_unique<HalvingDoubling>(n, size, halve, dbl);
    }
    case Algorithm::kDirect:
      if (op == Op::kSendRecv) {
        if (o.peer < 0 || o.peer >= n || o.peer == root) {
          throw InputError(w.with_key("peer"), fmt::format("must be a rank in [0, {}) other than the root", n));
        }
      }
      return std::make_unique<DirectProgram>(n, size, op == Op::kAllToAll, root, o.peer);
    case Algorithm::kNvls:
      return std::make_unique<NvlsProgram>(n, op, size, o.chunk, o.max_outstanding);
    case Algorithm::kAuto: break;
  }
  throw InputError(w.with_key("algorithm"), "choose an algorithm before building a program");
}

}  // namespace orrery::coll
