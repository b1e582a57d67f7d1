// Decentralized and federated optimization algorithms: the interface, the mixing they use, and the
// registry (name, one-line description, citation, the mixing matrix each needs).
//
// Model card
//   What      One iteration of an algorithm updates the n x d node states (rows = nodes) from stochastic
//             gradients (decentral/problem.h) and gossip with the step's mixing matrices. The update rules
//             are exactly those of ../shared/validation/decentralized.md; each algorithm file states its
//             own. Node i's new row reads only rows j with W(i, j) != 0, i.e. its in-neighbours' messages
//             (SparseMixing stores each row's in-neighbours), and every gossip round goes through
//             StepContext::gossip, so the same step runs one block of nodes per MPI rank
//             (decentral/mpi_runtime.h, docs/decentral_algorithms.md "MPI runtime").
//   Mixing    SparseMixing: row i lists (j, W(i, j)) for j in in(i) ∪ {i}; applying it costs
//             O((n + m) d) for m directed edges. A MixingSchedule holds, per step t of the graph sequence's
//             period, the doubly stochastic W, the row-stochastic A (pull) and the column-stochastic B
//             (push) the algorithm needs; the runner checks the algorithm's requirement (MatrixNeed) and
//             the graph's strong connectivity, and throws InputError otherwise.
//   Bytes     Each step adds to StepContext::bytes what its nodes send: for gossip, one message per
//             directed edge (self-loops are free) of `doubles` 8-byte values (or a compressed payload);
//             for federated rounds, one download and one upload per participating client.
//   Debug     Under ORRERY_ENABLE_ASSERTS the algorithms assert their conserved quantities: 1^T y = 1^T g
//             for column-stochastic tracking, pi^T y = pi^T D^{-1} g for PULL-DIAG-GT, and the mean of
//             the states for doubly stochastic gossip.
//   Adding    One file with a class deriving from Algorithm and a function returning its AlgorithmInfo
//             entries, plus one line in algorithm.cc's registry list.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "core/error.h"
#include "core/random.h"
#include "decentral/compression.h"
#include "decentral/graph.h"
#include "decentral/problem.h"

namespace orrery::decentral {

// A mixing matrix as per-row in-neighbour lists (row i: the weights node i gives its in-neighbours
// and itself).
class SparseMixing {
 public:
  SparseMixing() = default;
  explicit SparseMixing(const Eigen::MatrixXd& w);
  NodeIndex size() const { return static_cast<NodeIndex>(start_.empty() ? 0 : start_.size() - 1); }
  // out = W in. REQUIRES: out is not in (no aliasing); sizes match (out is resized).
  void apply(const NodeMatrix& in, NodeMatrix& out) const;
  // out = (W in + scale * add) - sub (sub may be null), element by element in that order, in one pass: the
  // values of apply() followed by those two updates, bit for bit. REQUIRES: out is none of the inputs.
  void apply_update(const NodeMatrix& in, NodeMatrix& out, double scale, const NodeMatrix& add,
                    const NodeMatrix* sub) const;
  // out = W^R in, R >= 1, using `tmp` as a buffer.
  void apply_power(const NodeMatrix& in, NodeMatrix& out, NodeMatrix& tmp, int64_t rounds) const;
  // Directed messages per round: the off-diagonal non-zeros.
  int64_t messages() const { return messages_; }
  double diagonal(NodeIndex i) const { return diag_[static_cast<size_t>(i)]; }
  const Eigen::MatrixXd& dense() const { return dense_; }
  // Unique per constructed matrix (copies share it; 0 for an empty one): lets a cache keyed by address
  // (the MPI runtime's) see that the matrix at an address was rebuilt, as churn does every step.
  uint64_t id() const { return id_; }
  // Row i's entries.
  struct Entry {
    NodeIndex col;
    double w;
  };
  const Entry* row_begin(NodeIndex i) const { return entries_.data() + start_[static_cast<size_t>(i)]; }
  const Entry* row_end(NodeIndex i) const { return entries_.data() + start_[static_cast<size_t>(i) + 1]; }

 private:
  template <class Epilogue>
  void apply_blocked(const NodeMatrix& in, NodeMatrix& out, Epilogue&& epilogue) const;

  std::vector<int64_t> start_;
  std::vector<Entry> entries_;
  std::vector<double> diag_;
  int64_t messages_ = 0;
  Eigen::MatrixXd dense_;
  uint64_t id_ = 0;
};

enum class MatrixNeed { kNone, kDoubly, kRow, kColumn, kRowAndColumn };
std::string_view need_name(MatrixNeed need);

// The mixing matrices of one period of the graph sequence (only those the algorithm needs are filled).
struct MixingSchedule {
  std::vector<SparseMixing> w;  // doubly stochastic
  std::vector<SparseMixing> a;  // row-stochastic (pull)
  std::vector<SparseMixing> b;  // column-stochastic (push)
  Eigen::VectorXd pi;           // weights of the "pi-weighted mean": Perron vector of A (of one period's
                                // product when time-varying), else uniform 1/n
  const SparseMixing& W(int64_t t) const { return w[static_cast<size_t>(t % static_cast<int64_t>(w.size()))]; }
  const SparseMixing& A(int64_t t) const { return a[static_cast<size_t>(t % static_cast<int64_t>(a.size()))]; }
  const SparseMixing& B(int64_t t) const { return b[static_cast<size_t>(t % static_cast<int64_t>(b.size()))]; }
};

struct AlgoParams {
  double lr = 0.05;               // step size a (client learning rate for federated algorithms)
  int64_t rounds = 1;             // MG-PULL-DIAG-GT: gossip rounds R per step (and an R-times batch)
  int64_t local_steps = 5;        // federated: local SGD steps per client job
  double client_fraction = 1.0;   // FedAvg/SCAFFOLD: fraction of clients sampled per round
  double server_lr = 1.0;         // FedAvg/SCAFFOLD/FedBuff server step
  double async_alpha = 0.6;       // FedAsync mixing weight alpha
  double staleness_power = 0.5;   // FedAsync/FedBuff: weight (1 + staleness)^-power
  int64_t buffer = 4;             // FedBuff: client updates aggregated per server step
  double speed_cv = 0.5;          // FedAsync/FedBuff: coefficient of variation of client speeds
  double gamma = 1.0;             // CHOCO: consensus step size
  CompressorSpec compressor;      // CHOCO payloads; federated uploads (with error feedback)
};

// Where the rows of the node matrices live when a run is spread over processes (decentral/mpi_runtime.h:
// one block of nodes per MPI rank). Every process runs the same algorithm code on full-size n x d
// matrices but owns, and keeps exact, only rows [row_begin, row_end): the oracle computes only those
// gradients and gossip fetches only the rows they read. Other rows hold stale values nobody reads.
class GossipExchange {
 public:
  virtual ~GossipExchange() = default;
  // Once per run on every process, after the mixing schedule is built (collective).
  virtual void setup(NodeIndex n, const MixingSchedule& mix, const Where& where) = 0;
  virtual NodeIndex row_begin() const = 0;
  virtual NodeIndex row_end() const = 0;
  // Metrics and output are produced on the root process only.
  virtual bool is_root() const = 0;
  // out's owned rows = those of m in, bit for bit as m.apply computes them (collective: every process
  // calls it with the same m, a matrix of the schedule given to setup, in the same order).
  virtual void mix(const SparseMixing& m, const NodeMatrix& in, NodeMatrix& out) = 0;
  // On the root: full = the owned rows of x of every process (collective). Elsewhere full is untouched.
  virtual void gather(const NodeMatrix& x, NodeMatrix& full) = 0;
  // rows has one row per entry of nodes; row j is filled by the process owning node nodes[j] (a node may
  // appear more than once). Afterwards every process holds every row, bit for bit (collective: every
  // process calls it with the same nodes and column count). Federated rounds use it for the uploads of the
  // sampled clients.
  virtual void share(const std::vector<NodeIndex>& nodes, NodeMatrix& rows) = 0;
};

// Per-client time and availability for federated algorithms (decentral/heterogeneity.h's NetworkProfile;
// null: the algorithms' own client speeds). Seconds of simulated time.
class ClientClock {
 public:
  virtual ~ClientClock() = default;
  // FedScale's client round time of `steps` local steps on `batch` samples with the given transfers.
  virtual double job_seconds(NodeIndex i, int64_t batch, int64_t steps, int64_t upload_bytes,
                             int64_t download_bytes) const = 0;
  virtual bool available(NodeIndex i, double t) const = 0;
  // When a job asked for at `start` is done, counting waits for availability and dropped attempts
  // (infinity: never).
  virtual double job_end(NodeIndex i, double start, int64_t batch, int64_t steps, int64_t upload_bytes,
                         int64_t download_bytes) const = 0;
};

struct StepContext {
  const MixingSchedule& mix;
  GradientOracle& oracle;
  const AlgoParams& params;
  RandomStream rng;          // the algorithm's own draws (client sampling, compression, speeds)
  int64_t bytes = 0;         // bytes sent so far
  double sim_time = std::numeric_limits<double>::quiet_NaN();  // simulated seconds (asynchronous algorithms)
  GossipExchange* exchange = nullptr;  // null: in-process, every row is local
  const ClientClock* clients = nullptr;  // federated: client times and availability (null: own speeds)
  // out = m in (on the owned rows): every gossip round of an algorithm goes through here, so the same code
  // runs in-process (m.apply) and over MPI. REQUIRES: out is not in.
  void gossip(const SparseMixing& m, const NodeMatrix& in, NodeMatrix& out) const {
    if (exchange != nullptr) {
      exchange->mix(m, in, out);
    } else {
      m.apply(in, out);
    }
  }
  // out = (m in + scale * add) - sub (sub may be null): gossip() followed by that update, bit for bit; one
  // fused pass in-process (SparseMixing::apply_update). REQUIRES: out is none of the inputs.
  void gossip_update(const SparseMixing& m, const NodeMatrix& in, NodeMatrix& out, double scale, const NodeMatrix& add,
                     const NodeMatrix* sub) const {
    if (exchange == nullptr) {
      m.apply_update(in, out, scale, add, sub);
      return;
    }
    exchange->mix(m, in, out);
    out += scale * add;
    if (sub != nullptr) out -= *sub;
  }
  // g = the stochastic gradient of every node (every owned node over MPI) at its row of x; each node's
  // minibatch stream is its own, so the owned rows are the in-process values.
  void gradients(const NodeMatrix& x, NodeMatrix& g) const {
    if (exchange == nullptr) {
      oracle.gradients(x, g);
      return;
    }
    for (NodeIndex i = exchange->row_begin(); i < exchange->row_end(); ++i) {
      oracle.gradient(i, x.row(i).data(), g.row(i).data());
    }
  }
  // Every row is exact here (in-process), so whole-matrix invariants can be asserted.
  bool all_rows() const { return exchange == nullptr; }
  // Whether node i's row is this process's to compute (always in-process).
  bool owns(NodeIndex i) const { return exchange == nullptr || (i >= exchange->row_begin() && i < exchange->row_end()); }
  // The owned rows [begin, end) of an n-row matrix.
  NodeIndex owned_begin() const { return exchange == nullptr ? 0 : exchange->row_begin(); }
  NodeIndex owned_end(NodeIndex n) const { return exchange == nullptr ? n : exchange->row_end(); }
  // Row j of rows, computed by the owner of nodes[j], to every process (GossipExchange::share; nothing to do
  // in-process, where every row is local).
  void share(const std::vector<NodeIndex>& nodes, NodeMatrix& rows) const {
    if (exchange != nullptr) exchange->share(nodes, rows);
  }
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  // Sets up the state from the initial node states x0 (n x d), evaluating initial gradients if needed.
  virtual void init(const NodeMatrix& x0, StepContext& ctx) = 0;
  // One iteration (k = 0, 1, ...).
  virtual void step(int64_t k, StepContext& ctx) = 0;
  // The node models the metrics read (e.g. z = x / w for push-sum; the server model on every row for
  // federated algorithms).
  virtual const NodeMatrix& iterates() = 0;
  // The gradient tracker y, for tracking algorithms (nullptr otherwise).
  virtual const NodeMatrix* tracker() const { return nullptr; }
  // How far the algorithm's conserved quantity is from exact (max over coordinates of |1^T y - 1^T g| for
  // column-stochastic tracking, |pi^T y - pi^T D^{-1} g| for PULL-DIAG-GT with a static A); 0 when none.
  virtual double conservation_error() const { return 0.0; }
};

struct AlgorithmInfo {
  std::string name;
  std::string description;
  std::string citation;
  MatrixNeed need = MatrixNeed::kDoubly;
  bool federated = false;  // a server and n clients; the graph only sets n
  std::function<std::unique_ptr<Algorithm>()> make;
  // y tracks the sum of the gradients rather than their mean (PULL-DIAG-GT), so the effective step is
  // n a: RunSpec::effective_lr divides a by n for these.
  bool tracks_sum = false;
};

// Every registered algorithm, in a stable order.
const std::vector<AlgorithmInfo>& algorithms();
std::vector<std::string> algorithm_names();
// Throws InputError (with the nearest name) for an unknown name.
const AlgorithmInfo& find_algorithm(std::string_view name, const Where& where);

// Helpers shared by the algorithm files.
void add_gossip_bytes(StepContext& ctx, const SparseMixing& m, int64_t doubles_per_message);
// One random stream per node, children "<purpose>/<i>" of rng: a node's draws (compression) depend on its
// own values only, so the process owning the node makes them alone, and in-process and MPI runs agree.
std::vector<RandomStream> per_node_streams(const RandomStream& rng, std::string_view purpose, NodeIndex n);
// Relative tolerance for the conserved-quantity assertions; true for a diverged run (inf or NaN in the
// rows or the scale), whose metrics report the divergence instead.
bool nearly_equal_rows(const Eigen::RowVectorXd& a, const Eigen::RowVectorXd& b, double scale);

// Registry parts, one per algorithm file.
void register_dsgd_family(std::vector<AlgorithmInfo>& out);
void register_tracking_family(std::vector<AlgorithmInfo>& out);
void register_pull_diag_family(std::vector<AlgorithmInfo>& out);
void register_federated_family(std::vector<AlgorithmInfo>& out);
void register_choco(std::vector<AlgorithmInfo>& out);

}  // namespace orrery::decentral
