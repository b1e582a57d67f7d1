#include "train/flow_comm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "coll/executor.h"
#include "coll/nccl_model.h"
#include "coll/program.h"
#include "core/error.h"
#include "des/engine.h"
#include "net/flow_network.h"

namespace orrery::train {
namespace {

// Several independent programs on disjoint sets of ranks, run as one: member lists map each program's
// ranks to the job's. Connections are keyed by global ranks, so the programs' rank-relative message
// ids never meet.
class GroupsProgram final : public coll::Program {
 public:
  explicit GroupsProgram(int32_t ranks) : where_(static_cast<size_t>(ranks), {-1, -1}), ranks_(ranks) {}

  void add(std::unique_ptr<coll::Program> program, std::vector<int32_t> members) {
    const auto g = static_cast<int32_t>(groups_.size());
    for (size_t i = 0; i < members.size(); ++i) where_.at(static_cast<size_t>(members[i])) = {g, static_cast<int32_t>(i)};
    groups_.push_back(Group{std::move(program), std::move(members)});
  }

  int32_t ranks() const override { return ranks_; }
  void start(int32_t rank, coll::Issuer& out) override {
    const auto [g, local] = where_[static_cast<size_t>(rank)];
    if (g < 0) return;
    Mapped m(out, groups_[static_cast<size_t>(g)].members);
    groups_[static_cast<size_t>(g)].program->start(local, m);
  }
  // The switch (coll::kSwitch, in-switch programs) is no rank: it maps to itself, and a message that
  // reaches it belongs to its sender's group.
  void on_send_done(int32_t rank, int32_t dst, uint64_t id, coll::Issuer& out) override {
    const auto [g, local] = where_[static_cast<size_t>(rank)];
    Mapped m(out, groups_[static_cast<size_t>(g)].members);
    groups_[static_cast<size_t>(g)].program->on_send_done(local, to_local(dst), id, m);
  }
  void on_receive(int32_t rank, int32_t src, uint64_t id, coll::Issuer& out) override {
    const auto [g, local] = where_[static_cast<size_t>(rank == coll::kSwitch ? src : rank)];
    Mapped m(out, groups_[static_cast<size_t>(g)].members);
    groups_[static_cast<size_t>(g)].program->on_receive(rank == coll::kSwitch ? coll::kSwitch : local, to_local(src), id, m);
  }
  // Each group meets at its own switch: the first member of the rank's group (the second for the first).
  int32_t switch_peer(int32_t rank) const override {
    const auto [g, local] = where_[static_cast<size_t>(rank)];
    if (g < 0) return -1;
    const std::vector<int32_t>& m = groups_[static_cast<size_t>(g)].members;
    if (m.size() < 2) return -1;
    return local == 0 ? m[1] : m[0];
  }
  int32_t to_local(int32_t rank) const {
    return rank == coll::kSwitch ? coll::kSwitch : where_[static_cast<size_t>(rank)].second;
  }
  uint64_t messages_per_rank() const override {
    return groups_.empty() ? 0 : groups_.front().program->messages_per_rank();
  }

 private:
  class Mapped final : public coll::Issuer {
   public:
    Mapped(coll::Issuer& out, const std::vector<int32_t>& members) : out_(out), members_(members) {}
    void send(int32_t src, int32_t dst, Bytes size, uint64_t id, uint32_t stream) override {
      out_.send(global(src), global(dst), size, id, stream);
    }
    int32_t global(int32_t local) const {
      return local == coll::kSwitch ? coll::kSwitch : members_[static_cast<size_t>(local)];
    }

   private:
    coll::Issuer& out_;
    const std::vector<int32_t>& members_;
  };
  struct Group {
    std::unique_ptr<coll::Program> program;
    std::vector<int32_t> members;
  };
  std::vector<Group> groups_;
  std::vector<std::pair<int32_t, int32_t>> where_;  // rank -> (group, local rank)
  int32_t ranks_;
};

// The topology's routes with NCCL's link efficiencies applied to the capacities, as AlphaBetaComm
// applies them to its levels: scale-up links x ClusterSpec::scaleup_efficiency (NCCL counts 20 of an
// NVLink's 25 GB/s), network links x ClusterSpec::network_efficiency (InfiniBand packet overhead); PCIe
// links as built.
class EfficientPaths final : public coll::PathProvider {
 public:
  EfficientPaths(const net::Topology& t, const ClusterSpec& c) : topo_(t), inner_(t, net::RailPolicy::kRailAligned), c_(c) {}
  Time path(int32_t src, int32_t dst, uint64_t key, std::vector<net::LinkUse>& out) override {
    return inner_.path(src, dst, key, out);
  }
  Time peek_path(int32_t src, int32_t dst, uint64_t key, std::vector<net::LinkUse>& out) override {
    return inner_.peek_path(src, dst, key, out);
  }
  std::vector<Bandwidth> capacities() const override {
    std::vector<Bandwidth> caps = inner_.capacities();
    for (size_t i = 0; i < caps.size(); ++i) {
      switch (topo_.link(static_cast<net::LinkId>(i)).kind) {
        case net::LinkKind::kScaleup: caps[i] = caps[i] * c_.scaleup_efficiency; break;
        case net::LinkKind::kNetwork: caps[i] = caps[i] * c_.network_efficiency; break;
        case net::LinkKind::kPcie: break;
      }
    }
    return caps;
  }

 private:
  const net::Topology& topo_;
  coll::TopologyPaths inner_;
  ClusterSpec c_;
};

}  // namespace

FlowComm::FlowComm(const net::Topology& topology, const ClusterSpec& cluster, const Plan& plan)
    : topo_(topology), cluster_(cluster), plan_(plan), alpha_beta_(cluster, plan),
      paths_(std::make_unique<EfficientPaths>(topology, cluster)) {
  if (topo_.num_gpus() != plan_.gpus()) {
    throw InputError(Where{}.with_key("topology"),
                     fmt::format("the topology has {} GPUs but the plan runs on {}", topo_.num_gpus(), plan_.gpus()));
  }
}

Time FlowComm::collective(coll::Op op, Bytes size, Group g) const {
  if (group_size(plan_, g) <= 1 || size.count() <= 0) return Time::zero();
  // NVLS where AlphaBetaComm's choice is NVLS: its latency replaces the ring's launch (baseLat 0).
  return cached(op, size, g, alpha_beta_.uses_nvls(op, size, g) ? coll::nccl_nvls_latency() : cluster_.collective_launch);
}

Time FlowComm::p2p(Bytes size) const {
  if (plan_.pp <= 1 || size.count() <= 0) return Time::zero();
  return cached(coll::Op::kSendRecv, size, Group::kPp, Time::zero());
}

Time FlowComm::cached(coll::Op op, Bytes size, Group g, Time overhead) const {
  const auto key = std::make_tuple(static_cast<int>(op), size.count(), static_cast<int>(g));
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const Time t = run(op, size, g) + overhead;
  cache_.emplace(key, t);
  return t;
}

Time FlowComm::run(coll::Op op, Bytes size, Group g) const {
  ++simulations_;
  const int32_t ranks = static_cast<int32_t>(plan_.gpus());
  const int64_t n = group_size(plan_, g);
  const int64_t stride = group_stride(plan_, g);
  GroupsProgram program(ranks);
  bool nvls = false;
  if (op == coll::Op::kSendRecv) {
    // Every rank of every stage but the last sends to the same rank of the next stage.
    coll::ProgramOptions o;
    o.root = 0;
    o.peer = 1;
    for (int32_t r = 0; r < ranks; ++r) {
      if ((r / stride) % n == n - 1) continue;
      program.add(coll::make_program(op, coll::Algorithm::kDirect, 2, size, o),
                  {r, static_cast<int32_t>(r + stride)});
    }
  } else {
    // NVLS where AlphaBetaComm picks it: in-switch reduction, 128 KiB chunks (NCCL_NVLS_CHUNKSIZE), on
    // scale-up links at NCCL's NVLS share. Else NCCL's ring/tree choice.
    nvls = alpha_beta_.uses_nvls(op, size, g);
    const coll::AlphaBetaParams ab = alpha_beta_.params(g);
    const coll::Algorithm algo = nvls ? coll::Algorithm::kNvls : coll::choose_algorithm(op, size, ab);
    coll::ProgramOptions o;
    if (nvls) {
      o.chunk = Bytes::KiB(128);
    } else {
      const auto per_node = static_cast<int32_t>(ab.ranks_per_node);
      o.ranks_per_node = n % per_node == 0 ? per_node : static_cast<int32_t>(n);
      o.channels = std::clamp(per_node, 1, 16);
      const int64_t steps_bytes = size.count() / std::max<int64_t>(1, n * o.channels * 2);
      o.chunk = Bytes(std::max<int64_t>(Bytes::KiB(512).count(), steps_bytes));
    }
    for (int32_t r = 0; r < ranks; ++r) {
      if ((r / stride) % n != 0) continue;  // r is its group's first member
      std::vector<int32_t> members(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) members[static_cast<size_t>(i)] = static_cast<int32_t>(r + i * stride);
      program.add(coll::make_program(op, algo, static_cast<int32_t>(n), size, o), std::move(members));
    }
  }
  std::vector<Bandwidth> caps = paths_->capacities();
  if (nvls) {
    const double share = coll::nccl_nvls_bandwidth_factor(cluster_.nvls_efficiency);
    for (size_t i = 0; i < caps.size(); ++i) {
      if (topo_.link(static_cast<net::LinkId>(i)).kind == net::LinkKind::kScaleup) caps[i] = caps[i] * share;
    }
  }
  des::Engine engine;
  net::FlowNetwork network(engine, caps);
  return coll::execute(program, engine, network, *paths_).time;
}

}  // namespace orrery::train
