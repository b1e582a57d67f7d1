// The MPI runtime (ORRERY_WITH_MPI builds); see mpi_runtime.h for the model card.
#include "decentral/mpi_runtime.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "core/assert.h"

namespace orrery::decentral {

namespace {

// The row counts an MPI call takes are ints: refuse rather than overflow.
int as_count(int64_t doubles) {
  ORRERY_CHECK(doubles >= 0 && doubles <= INT_MAX);
  return static_cast<int>(doubles);
}

// A sparsity pattern as one vector: per row, its entry count then its columns (SparseMixing's order).
std::vector<NodeIndex> pattern_of(const SparseMixing& m) {
  std::vector<NodeIndex> key;
  for (NodeIndex i = 0; i < m.size(); ++i) {
    key.push_back(static_cast<NodeIndex>(m.row_end(i) - m.row_begin(i)));
    for (const SparseMixing::Entry* e = m.row_begin(i); e != m.row_end(i); ++e) key.push_back(e->col);
  }
  return key;
}

// Whether every entry of pattern `b` is one of `a` (both from pattern_of, columns ascending per row).
bool covers(const std::vector<NodeIndex>& a, const std::vector<NodeIndex>& b) {
  if (a.size() < b.size()) return false;
  size_t i = 0, j = 0;
  while (j < b.size()) {
    if (i >= a.size()) return false;
    const NodeIndex na = a[i++], nb = b[j++];
    const size_t ea = i + static_cast<size_t>(na), eb = j + static_cast<size_t>(nb);
    while (j < eb) {
      while (i < ea && a[i] < b[j]) ++i;
      if (i == ea || a[i] != b[j]) return false;
      ++i;
      ++j;
    }
    i = ea;
  }
  return i == a.size();
}

// One distinct sparsity pattern: its neighbourhood communicator and which rows go where.
struct Plan {
  std::vector<NodeIndex> pattern;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<std::vector<NodeIndex>> send_rows;  // per destination (communicator order): owned rows it reads
  std::vector<std::vector<NodeIndex>> recv_rows;  // per source (communicator order): rows it sends here
  int64_t send_total = 0, recv_total = 0;         // rows
};

// One mixing matrix of the schedule on this rank: its plan, and the matrix restricted to the rows this
// rank reads (`rows`: its own and the received ones, ascending), with this rank's rows as given and the
// others' replaced by the identity. The restriction keeps each row's entries in the same order (the
// column map is increasing), so SparseMixing::apply computes this rank's rows with the same operations
// in the same order as on the whole matrix: the same bits.
struct LocalMixing {
  uint64_t id = 0;  // SparseMixing::id() of the matrix it was built from
  size_t plan = 0;
  std::vector<NodeIndex> rows;
  SparseMixing m;
};

}  // namespace

struct MpiRuntime::Impl {
  bool owns_mpi = false;  // start() called MPI_Init, so the destructor finalizes
  MPI_Comm world = MPI_COMM_NULL;
  int rank = 0, size = 1;
  NodeIndex n = 0, begin = 0, end = 0;
  std::vector<Plan> plans;
  std::unordered_map<const SparseMixing*, LocalMixing> local_of;
  NodeMatrix local_in, local_out;     // rows of `in` this rank reads, and its rows of the result
  std::vector<double> sendbuf, recvbuf;
  std::vector<int> sendcounts, sdispls, recvcounts, rdispls, gather_counts, gather_displs;
  std::vector<int64_t> cursor;
  int64_t bytes_sent = 0;

  NodeIndex owner(NodeIndex row) const {
    // The block boundaries are floor(r n / size): the owner is the last r with block_begin(r) <= row.
    int r = static_cast<int>((static_cast<int64_t>(row) * size) / std::max<NodeIndex>(n, 1));
    while (r + 1 < size && block_begin(n, r + 1, size) <= row) ++r;
    while (r > 0 && block_begin(n, r, size) > row) --r;
    return r;
  }

  // The first plan whose pattern covers m's (its exchanges bring every row m reads; a larger one only sends
  // rows nobody reads), a new one when none does. The choice depends on m and the plan list alone, which
  // every rank builds in the same order, so every rank picks the same plan and creates plans (collective)
  // together.
  size_t plan_for(const SparseMixing& m) {
    std::vector<NodeIndex> pattern = pattern_of(m);
    size_t k = 0;
    while (k < plans.size() && !covers(plans[k].pattern, pattern)) ++k;
    if (k == plans.size()) plans.push_back(make_plan(m, std::move(pattern)));
    return k;
  }

  // This rank's restriction of m, built once per matrix: a matrix given to setup() hits; one rebuilt at the
  // same address (churn: each step's matrices on the present nodes) or never seen is restricted anew.
  const LocalMixing& local_for(const SparseMixing& m) {
    const auto found = local_of.find(&m);
    if (found != local_of.end() && found->second.id == m.id()) return found->second;
    LocalMixing l = restrict_to_rank(m, plan_for(m));
    l.id = m.id();
    return local_of[&m] = std::move(l);
  }

  void free_plans() {
    for (Plan& p : plans) {
      if (p.comm != MPI_COMM_NULL) MPI_Comm_free(&p.comm);
    }
    plans.clear();
    local_of.clear();
  }

  LocalMixing restrict_to_rank(const SparseMixing& m, size_t plan) const {
    LocalMixing l;
    l.plan = plan;
    for (NodeIndex i = begin; i < end; ++i) l.rows.push_back(i);
    for (const std::vector<NodeIndex>& received : plans[plan].recv_rows) l.rows.insert(l.rows.end(), received.begin(), received.end());
    std::sort(l.rows.begin(), l.rows.end());
    std::vector<NodeIndex> at(static_cast<size_t>(n), -1);
    for (size_t r = 0; r < l.rows.size(); ++r) at[static_cast<size_t>(l.rows[r])] = static_cast<NodeIndex>(r);
    const auto k = static_cast<Eigen::Index>(l.rows.size());
    Eigen::MatrixXd w = Eigen::MatrixXd::Zero(k, k);
    for (Eigen::Index r = 0; r < k; ++r) {
      const NodeIndex i = l.rows[static_cast<size_t>(r)];
      if (i < begin || i >= end) {
        w(r, r) = 1.0;
        continue;
      }
      for (const SparseMixing::Entry* e = m.row_begin(i); e != m.row_end(i); ++e) w(r, at[static_cast<size_t>(e->col)]) = e->w;
    }
    l.m = SparseMixing(w);
    return l;
  }

  Plan make_plan(const SparseMixing& m, std::vector<NodeIndex> pattern) const {
    Plan p;
    p.pattern = std::move(pattern);
    // Rows read here from each other rank, and owned rows read by each other rank, in ascending order.
    std::vector<std::vector<NodeIndex>> from(static_cast<size_t>(size)), to(static_cast<size_t>(size));
    for (NodeIndex i = 0; i < n; ++i) {
      const int reader = static_cast<int>(owner(i));
      for (const SparseMixing::Entry* e = m.row_begin(i); e != m.row_end(i); ++e) {
        const int holder = static_cast<int>(owner(e->col));
        if (holder == reader) continue;
        if (reader == rank) from[static_cast<size_t>(holder)].push_back(e->col);
        if (holder == rank) to[static_cast<size_t>(reader)].push_back(e->col);
      }
    }
    std::vector<int> sources, destinations;
    for (int q = 0; q < size; ++q) {
      for (auto* lists : {&from, &to}) {
        std::vector<NodeIndex>& v = (*lists)[static_cast<size_t>(q)];
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
      }
      if (!from[static_cast<size_t>(q)].empty()) {
        sources.push_back(q);
        p.recv_total += static_cast<int64_t>(from[static_cast<size_t>(q)].size());
        p.recv_rows.push_back(std::move(from[static_cast<size_t>(q)]));
      }
      if (!to[static_cast<size_t>(q)].empty()) {
        destinations.push_back(q);
        p.send_total += static_cast<int64_t>(to[static_cast<size_t>(q)].size());
        p.send_rows.push_back(std::move(to[static_cast<size_t>(q)]));
      }
    }
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Dist_graph_create_adjacent(world, static_cast<int>(sources.size()), sources.data(), MPI_UNWEIGHTED,
                                   static_cast<int>(destinations.size()), destinations.data(), MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &comm);
    p.comm = comm;
    return p;
  }
};

bool mpi_available() { return true; }

MpiRuntime::MpiRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<MpiRuntime> MpiRuntime::start(const Where&) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) throw std::runtime_error("MPI was already finalized in this process");
  auto impl = std::make_unique<Impl>();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    MPI_Init(nullptr, nullptr);
    impl->owns_mpi = true;
  }
  // A private copy of MPI_COMM_WORLD: our collectives never match anyone else's.
  MPI_Comm_dup(MPI_COMM_WORLD, &impl->world);
  MPI_Comm_rank(impl->world, &impl->rank);
  MPI_Comm_size(impl->world, &impl->size);
  return std::unique_ptr<MpiRuntime>(new MpiRuntime(std::move(impl)));
}

MpiRuntime::~MpiRuntime() {
  impl_->free_plans();
  MPI_Comm_free(&impl_->world);
  if (impl_->owns_mpi) MPI_Finalize();
}

int MpiRuntime::rank() const { return impl_->rank; }
int MpiRuntime::size() const { return impl_->size; }
int64_t MpiRuntime::bytes_sent() const { return impl_->bytes_sent; }
void MpiRuntime::barrier() const { MPI_Barrier(impl_->world); }
NodeIndex MpiRuntime::row_begin() const { return impl_->begin; }
NodeIndex MpiRuntime::row_end() const { return impl_->end; }

void MpiRuntime::setup(NodeIndex n, const MixingSchedule& mix, const Where& where) {
  Impl& s = *impl_;
  // Every rank must be running the same thing: node counts and schedule lengths agree when their maxima
  // equal minus the maxima of their negations (a decision every rank takes alike, so none waits alone).
  const auto matrices = static_cast<int64_t>(mix.w.size() + mix.a.size() + mix.b.size());
  const int64_t mine[4] = {n, -static_cast<int64_t>(n), matrices, -matrices};
  int64_t most[4] = {0, 0, 0, 0};
  MPI_Allreduce(mine, most, 4, MPI_INT64_T, MPI_MAX, s.world);
  if (most[0] != -most[1] || most[2] != -most[3]) {
    throw InputError(where, "the MPI ranks disagree on the node count or the mixing schedule",
                     "start every rank with the same command line");
  }
  if (n < s.size) {
    throw InputError(where,
                     fmt::format("the MPI runtime runs at least one node per rank, but {} ranks share {} nodes", s.size, n),
                     fmt::format("start at most {} ranks (mpirun -np {})", n, n));
  }
  s.free_plans();
  s.n = n;
  s.begin = block_begin(n, s.rank, s.size);
  s.end = block_begin(n, s.rank + 1, s.size);
  for (const std::vector<SparseMixing>* list : {&mix.w, &mix.a, &mix.b}) {
    for (const SparseMixing& m : *list) {
      ORRERY_CHECK(m.size() == n);
      s.local_for(m);
    }
  }
}

void MpiRuntime::mix(const SparseMixing& m, const NodeMatrix& in, NodeMatrix& out) {
  Impl& s = *impl_;
  ORRERY_CHECK(m.size() == s.n && in.rows() == s.n && &in != &out);
  const LocalMixing& local = s.local_for(m);
  const Plan& p = s.plans[local.plan];
  const int64_t c = in.cols();
  const auto row_bytes = static_cast<size_t>(c) * sizeof(double);
  s.sendbuf.resize(static_cast<size_t>(p.send_total * c));
  s.recvbuf.resize(static_cast<size_t>(p.recv_total * c));
  s.sendcounts.clear();
  s.sdispls.clear();
  s.recvcounts.clear();
  s.rdispls.clear();
  int64_t at = 0;
  for (const std::vector<NodeIndex>& rows : p.send_rows) {
    s.sdispls.push_back(as_count(at));
    for (NodeIndex j : rows) {
      std::memcpy(s.sendbuf.data() + at, in.row(j).data(), row_bytes);
      at += c;
    }
    s.sendcounts.push_back(as_count(at) - s.sdispls.back());
  }
  at = 0;
  for (const std::vector<NodeIndex>& rows : p.recv_rows) {
    s.rdispls.push_back(as_count(at));
    at += static_cast<int64_t>(rows.size()) * c;
    s.recvcounts.push_back(as_count(at) - s.rdispls.back());
  }
  MPI_Neighbor_alltoallv(s.sendbuf.data(), s.sendcounts.data(), s.sdispls.data(), MPI_DOUBLE, s.recvbuf.data(),
                         s.recvcounts.data(), s.rdispls.data(), MPI_DOUBLE, p.comm);
  s.bytes_sent += p.send_total * c * static_cast<int64_t>(sizeof(double));
  // The rows this rank reads (its own from `in`, the others from the receive buffer, whose sources and
  // rows are both ascending), the restricted matrix applied to them, and this rank's rows copied out.
  s.local_in.resize(static_cast<Eigen::Index>(local.rows.size()), c);
  at = 0;
  for (size_t r = 0; r < local.rows.size(); ++r) {
    const NodeIndex j = local.rows[r];
    const double* src = in.row(j).data();
    if (j < s.begin || j >= s.end) {
      src = s.recvbuf.data() + at;
      at += c;
    }
    std::memcpy(s.local_in.row(static_cast<Eigen::Index>(r)).data(), src, row_bytes);
  }
  local.m.apply(s.local_in, s.local_out);
  if (out.rows() != s.n || out.cols() != c) out.setZero(s.n, c);  // rows of other ranks: never read
  for (size_t r = 0; r < local.rows.size(); ++r) {
    const NodeIndex j = local.rows[r];
    if (j >= s.begin && j < s.end) std::memcpy(out.row(j).data(), s.local_out.row(static_cast<Eigen::Index>(r)).data(), row_bytes);
  }
}

void MpiRuntime::gather(const NodeMatrix& x, NodeMatrix& full) {
  Impl& s = *impl_;
  ORRERY_CHECK(x.rows() == s.n);
  const int64_t c = x.cols();
  if (s.rank == 0) {
    full.resize(s.n, c);
    s.gather_counts.clear();
    s.gather_displs.clear();
    for (int r = 0; r < s.size; ++r) {
      s.gather_displs.push_back(as_count(block_begin(s.n, r, s.size) * c));
      s.gather_counts.push_back(as_count((block_begin(s.n, r + 1, s.size) - block_begin(s.n, r, s.size)) * c));
    }
  }
  MPI_Gatherv(x.data() + s.begin * c, as_count((s.end - s.begin) * c), MPI_DOUBLE, s.rank == 0 ? full.data() : nullptr,
              s.gather_counts.data(), s.gather_displs.data(), MPI_DOUBLE, 0, s.world);
}

void MpiRuntime::share(const std::vector<NodeIndex>& nodes, NodeMatrix& rows) {
  Impl& s = *impl_;
  ORRERY_CHECK(rows.rows() == static_cast<Eigen::Index>(nodes.size()));
  const int64_t c = rows.cols();
  const auto row_bytes = static_cast<size_t>(c) * sizeof(double);
  // Each rank contributes the rows of its nodes in list order; MPI_Allgatherv lays the contributions out
  // by rank, and every rank then walks the list, taking each row from its owner's part.
  s.gather_counts.assign(static_cast<size_t>(s.size), 0);
  for (NodeIndex i : nodes) {
    ORRERY_CHECK(i >= 0 && i < s.n);
    s.gather_counts[static_cast<size_t>(s.owner(i))] += as_count(c);
  }
  s.gather_displs.assign(static_cast<size_t>(s.size), 0);
  int64_t total = 0;
  for (int r = 0; r < s.size; ++r) {
    s.gather_displs[static_cast<size_t>(r)] = as_count(total);
    total += s.gather_counts[static_cast<size_t>(r)];
  }
  s.sendbuf.resize(static_cast<size_t>(s.gather_counts[static_cast<size_t>(s.rank)]));
  int64_t at = 0;
  for (size_t j = 0; j < nodes.size(); ++j) {
    if (nodes[j] < s.begin || nodes[j] >= s.end) continue;
    std::memcpy(s.sendbuf.data() + at, rows.row(static_cast<Eigen::Index>(j)).data(), row_bytes);
    at += c;
  }
  s.recvbuf.resize(static_cast<size_t>(total));
  MPI_Allgatherv(s.sendbuf.data(), s.gather_counts[static_cast<size_t>(s.rank)], MPI_DOUBLE, s.recvbuf.data(),
                 s.gather_counts.data(), s.gather_displs.data(), MPI_DOUBLE, s.world);
  s.bytes_sent += at * static_cast<int64_t>(sizeof(double)) * (s.size - 1);
  s.cursor.assign(static_cast<size_t>(s.size), 0);
  for (size_t j = 0; j < nodes.size(); ++j) {
    const auto r = static_cast<size_t>(s.owner(nodes[j]));
    std::memcpy(rows.row(static_cast<Eigen::Index>(j)).data(), s.recvbuf.data() + s.gather_displs[r] + s.cursor[r], row_bytes);
    s.cursor[r] += c;
  }
}

}  // namespace orrery::decentral
