#include "decentral/graph.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/assert.h"
#include "core/random.h"
#include "core/strings.h"

namespace orrery::decentral {

// ---------------------------------------------------------------------------------------------------
// Graph

Graph::Graph(NodeIndex n, std::vector<Edge> edges, std::string name)
    : n_(n), name_(std::move(name)), edges_(std::move(edges)) {
  ORRERY_CHECK(n >= 0 && n <= kMaxNodes);
  for (const Edge& e : edges_) ORRERY_CHECK(e.from >= 0 && e.from < n && e.to >= 0 && e.to < n);
  std::erase_if(edges_, [](const Edge& e) { return e.from == e.to; });
  std::sort(edges_.begin(), edges_.end(),
            [](const Edge& a, const Edge& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
  out_.resize(static_cast<size_t>(n));
  in_.resize(static_cast<size_t>(n));
  for (const Edge& e : edges_) {
    out_[static_cast<size_t>(e.from)].push_back(e.to);  // sorted: edges_ is sorted by (from, to)
    in_[static_cast<size_t>(e.to)].push_back(e.from);   // sorted: `from` is non-decreasing
  }
}

bool Graph::has_edge(NodeIndex from, NodeIndex to) const {
  if (from < 0 || from >= n_ || to < 0 || to >= n_) return false;
  const auto& out = out_neighbors(from);
  return std::binary_search(out.begin(), out.end(), to);
}

bool Graph::is_symmetric() const {
  return std::all_of(edges_.begin(), edges_.end(), [&](const Edge& e) { return has_edge(e.to, e.from); });
}

bool Graph::is_balanced() const {
  for (NodeIndex v = 0; v < n_; ++v) {
    if (in_degree(v) != out_degree(v)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Connectivity

namespace {

// Nodes reachable from `start` following out-edges (forward) or in-edges (backward).
std::vector<char> reachable(const Graph& g, NodeIndex start, bool forward) {
  std::vector<char> seen(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<NodeIndex> stack{start};
  seen[static_cast<size_t>(start)] = 1;
  while (!stack.empty()) {
    const NodeIndex v = stack.back();
    stack.pop_back();
    for (NodeIndex w : forward ? g.out_neighbors(v) : g.in_neighbors(v)) {
      if (!seen[static_cast<size_t>(w)]) {
        seen[static_cast<size_t>(w)] = 1;
        stack.push_back(w);
      }
    }
  }
  return seen;
}

bool all_set(const std::vector<char>& v) {
  return std::all_of(v.begin(), v.end(), [](char c) { return c != 0; });
}

}  // namespace

bool is_strongly_connected(const Graph& g) {
  if (g.num_nodes() <= 1) return true;
  return all_set(reachable(g, 0, true)) && all_set(reachable(g, 0, false));
}

bool is_weakly_connected(const Graph& g) {
  if (g.num_nodes() <= 1) return true;
  std::vector<char> seen(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<NodeIndex> stack{0};
  seen[0] = 1;
  while (!stack.empty()) {
    const NodeIndex v = stack.back();
    stack.pop_back();
    for (const auto* list : {&g.out_neighbors(v), &g.in_neighbors(v)}) {
      for (NodeIndex w : *list) {
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.push_back(w);
        }
      }
    }
  }
  return all_set(seen);
}

Components strongly_connected_components(const Graph& g) {
  // Kosaraju: order nodes by DFS finish time on g, then sweep g^T in reverse finish order.
  const size_t n = static_cast<size_t>(g.num_nodes());
  std::vector<NodeIndex> finish;
  finish.reserve(n);
  std::vector<char> seen(n, 0);
  std::vector<std::pair<NodeIndex, size_t>> stack;  // (node, next out-neighbour index)
  for (NodeIndex s = 0; s < g.num_nodes(); ++s) {
    if (seen[static_cast<size_t>(s)]) continue;
    seen[static_cast<size_t>(s)] = 1;
    stack.emplace_back(s, 0);
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const auto& out = g.out_neighbors(v);
      if (next < out.size()) {
        const NodeIndex w = out[next++];
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.emplace_back(w, 0);
        }
      } else {
        finish.push_back(v);
        stack.pop_back();
      }
    }
  }
  Components c;
  c.id.assign(n, -1);
  std::vector<NodeIndex> todo;
  for (auto it = finish.rbegin(); it != finish.rend(); ++it) {
    if (c.id[static_cast<size_t>(*it)] >= 0) continue;
    todo.push_back(*it);
    c.id[static_cast<size_t>(*it)] = c.count;
    while (!todo.empty()) {
      const NodeIndex v = todo.back();
      todo.pop_back();
      for (NodeIndex w : g.in_neighbors(v)) {
        if (c.id[static_cast<size_t>(w)] < 0) {
          c.id[static_cast<size_t>(w)] = c.count;
          todo.push_back(w);
        }
      }
    }
    ++c.count;
  }
  return c;
}

// ---------------------------------------------------------------------------------------------------
// GraphSequence

GraphSequence::GraphSequence(Graph g) : name_(g.name()) { graphs_.push_back(std::move(g)); }

GraphSequence::GraphSequence(std::vector<Graph> graphs, std::string name)
    : graphs_(std::move(graphs)), name_(std::move(name)) {
  ORRERY_CHECK(!graphs_.empty());
  for (const Graph& g : graphs_) ORRERY_CHECK(g.num_nodes() == graphs_.front().num_nodes());
}

const Graph& GraphSequence::graph_at(int64_t t) const {
  ORRERY_CHECK(t >= 0);
  return graphs_[static_cast<size_t>(t % period())];
}

Graph GraphSequence::union_graph() const {
  if (is_static()) return graphs_.front();
  std::vector<Edge> all;
  for (const Graph& g : graphs_) all.insert(all.end(), g.edges().begin(), g.edges().end());
  return Graph(num_nodes(), std::move(all), name_ + " (union of one period)");
}

// ---------------------------------------------------------------------------------------------------
// Generators

namespace {

void require_nodes(NodeIndex n, NodeIndex min_n, const Where& where, std::string_view family) {
  if (n < min_n || n > kMaxNodes) {
    throw InputError(where, fmt::format("{} needs between {} and {} nodes, got {}", family, min_n, kMaxNodes, n));
  }
}

void add_undirected(std::vector<Edge>& edges, NodeIndex a, NodeIndex b) {
  edges.push_back({a, b});
  edges.push_back({b, a});
}

void require_probability(double p, const Where& where) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw InputError(where, fmt::format("edge probability must lie in [0, 1], got {}", p));
  }
}

// ceil(log2 n) for n >= 1.
int ceil_log2(NodeIndex n) { return std::bit_width(static_cast<uint32_t>(n - 1)); }

}  // namespace

Graph ring(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "ring");
  std::vector<Edge> e;
  for (NodeIndex i = 0; i < n; ++i) add_undirected(e, i, (i + 1) % n);
  return Graph(n, std::move(e), fmt::format("ring:{}", n));
}

Graph directed_ring(NodeIndex n, const Where& where) { return directed_ring_with_chords(n, {}, where); }

Graph directed_ring_with_chords(NodeIndex n, const std::vector<Edge>& chords, const Where& where) {
  require_nodes(n, 2, where, "directed ring");
  std::vector<Edge> e;
  for (NodeIndex i = 0; i < n; ++i) e.push_back({i, (i + 1) % n});
  std::string name = fmt::format("directed-ring:{}", n);
  for (size_t k = 0; k < chords.size(); ++k) {
    const Edge& c = chords[k];
    if (c.from < 0 || c.from >= n || c.to < 0 || c.to >= n || c.from == c.to) {
      throw InputError(where.with_key("chords"),
                       fmt::format("chord {}-{} must join two different nodes in [0, {})", c.from, c.to, n));
    }
    e.push_back(c);
    name += fmt::format("{}{}-{}", k == 0 ? ":chords=" : ",", c.from, c.to);
  }
  return Graph(n, std::move(e), name);
}

Graph torus(NodeIndex rows, NodeIndex cols, const Where& where) {
  if (rows < 2 || cols < 2 || int64_t{rows} * cols > kMaxNodes) {
    throw InputError(where, fmt::format("a torus needs at least 2x2 and at most {} nodes, got {}x{}", kMaxNodes, rows, cols));
  }
  std::vector<Edge> e;
  for (NodeIndex r = 0; r < rows; ++r) {
    for (NodeIndex c = 0; c < cols; ++c) {
      const NodeIndex v = r * cols + c;
      add_undirected(e, v, r * cols + (c + 1) % cols);
      add_undirected(e, v, ((r + 1) % rows) * cols + c);
    }
  }
  return Graph(rows * cols, std::move(e), fmt::format("torus:{}x{}", rows, cols));
}

Graph grid(NodeIndex rows, NodeIndex cols, const Where& where) {
  if (rows < 1 || cols < 1 || int64_t{rows} * cols < 2 || int64_t{rows} * cols > kMaxNodes) {
    throw InputError(where, fmt::format("a grid needs between 2 and {} nodes, got {}x{}", kMaxNodes, rows, cols));
  }
  std::vector<Edge> e;
  for (NodeIndex r = 0; r < rows; ++r) {
    for (NodeIndex c = 0; c < cols; ++c) {
      const NodeIndex v = r * cols + c;
      if (c + 1 < cols) add_undirected(e, v, v + 1);
      if (r + 1 < rows) add_undirected(e, v, v + cols);
    }
  }
  return Graph(rows * cols, std::move(e), fmt::format("grid:{}x{}", rows, cols));
}

Graph static_exponential(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "exponential graph");
  std::vector<Edge> e;
  for (NodeIndex i = 0; i < n; ++i) {
    for (int64_t hop = 1; hop < n; hop *= 2) e.push_back({i, static_cast<NodeIndex>((i + hop) % n)});
  }
  return Graph(n, std::move(e), fmt::format("exponential:{}", n));
}

GraphSequence one_peer_exponential(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "one-peer exponential graph");
  const int tau = ceil_log2(n);
  std::vector<Graph> graphs;
  for (int s = 0; s < tau; ++s) {
    const int64_t hop = int64_t{1} << s;
    std::vector<Edge> e;
    for (NodeIndex i = 0; i < n; ++i) e.push_back({i, static_cast<NodeIndex>((i + hop) % n)});
    graphs.emplace_back(n, std::move(e), fmt::format("one-peer-exponential:{}@{}", n, s));
  }
  return GraphSequence(std::move(graphs), fmt::format("one-peer-exponential:{}", n));
}

Graph hypercube(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "hypercube");
  if (!std::has_single_bit(static_cast<uint32_t>(n))) {
    const uint32_t lo = std::bit_floor(static_cast<uint32_t>(n));
    throw InputError(where, fmt::format("a hypercube needs a power-of-two node count, got {}", n),
                     fmt::format("nearest: {} or {}", lo, 2 * lo));
  }
  std::vector<Edge> e;
  for (NodeIndex i = 0; i < n; ++i) {
    for (NodeIndex bit = 1; bit < n; bit *= 2) e.push_back({i, i ^ bit});
  }
  return Graph(n, std::move(e), fmt::format("hypercube:{}", n));
}

Graph erdos_renyi(NodeIndex n, double p, uint64_t seed, const Where& where) {
  require_nodes(n, 2, where, "Erdős–Rényi graph");
  require_probability(p, where);
  RandomStream rng = RandomStream::derive(seed, "decentral.graph.erdos-renyi");
  std::vector<Edge> e;
  for (NodeIndex i = 0; i < n; ++i) {
    for (NodeIndex j = i + 1; j < n; ++j) {
      if (rng.uniform01() < p) add_undirected(e, i, j);
    }
  }
  return Graph(n, std::move(e), fmt::format("erdos-renyi:{}:{}:seed={}", n, p, seed));
}

Graph random_strongly_connected(NodeIndex n, double p, uint64_t seed, const Where& where) {
  require_nodes(n, 2, where, "random strongly connected digraph");
  require_probability(p, where);
  RandomStream rng = RandomStream::derive(seed, "decentral.graph.random-strongly-connected");
  // A uniformly random cyclic order (Fisher-Yates) closed into a directed cycle makes the graph
  // strongly connected; every other ordered pair is then added with probability p.
  std::vector<NodeIndex> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.uniform_int(i + 1)]);
  std::vector<Edge> e;
  for (size_t i = 0; i < order.size(); ++i) e.push_back({order[i], order[(i + 1) % order.size()]});
  for (NodeIndex i = 0; i < n; ++i) {
    for (NodeIndex j = 0; j < n; ++j) {
      if (i != j && rng.uniform01() < p) e.push_back({i, j});
    }
  }
  return Graph(n, std::move(e), fmt::format("random-strongly-connected:{}:{}:seed={}", n, p, seed));
}

Graph star(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "star");
  std::vector<Edge> e;
  for (NodeIndex i = 1; i < n; ++i) add_undirected(e, 0, i);
  return Graph(n, std::move(e), fmt::format("star:{}", n));
}

Graph complete(NodeIndex n, const Where& where) {
  require_nodes(n, 2, where, "complete graph");
  if (n > 8192) throw InputError(where, fmt::format("a complete graph is limited to 8192 nodes, got {}", n));
  std::vector<Edge> e;
  e.reserve(static_cast<size_t>(n) * static_cast<size_t>(n - 1));
  for (NodeIndex i = 0; i < n; ++i) {
    for (NodeIndex j = 0; j < n; ++j) {
      if (i != j) e.push_back({i, j});
    }
  }
  return Graph(n, std::move(e), fmt::format("complete:{}", n));
}

// ---------------------------------------------------------------------------------------------------
// Edge lists

namespace {

// A non-negative integer token, or nullopt.
std::optional<int64_t> parse_index(std::string_view tok) {
  if (tok.empty() || tok.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

Graph parse_edge_list(std::string_view text, const std::string& file) {
  std::vector<Edge> edges;
  std::vector<int64_t> edge_lines;
  int64_t declared_nodes = -1;
  int64_t nodes_line = 0;
  bool undirected = false;
  int64_t max_index = -1;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const auto toks = split_ws(line);
    if (toks.empty()) continue;
    const Where w{file, line_no, ""};
    if (toks[0] == "nodes") {
      if (toks.size() != 2) throw InputError(w, "expected 'nodes N'");
      const auto v = parse_index(toks[1]);
      if (!v || *v < 1 || *v > kMaxNodes) {
        throw InputError(w, fmt::format("expected a node count in [1, {}], got '{}'", kMaxNodes, toks[1]));
      }
      if (declared_nodes >= 0) throw InputError(w, "'nodes' given twice");
      declared_nodes = *v;
      nodes_line = line_no;
      continue;
    }
    if (toks[0] == "undirected" || toks[0] == "directed") {
      if (toks.size() != 1) throw InputError(w, fmt::format("expected '{}' alone on its line", toks[0]));
      undirected = toks[0] == "undirected";
      continue;
    }
    const bool word = !toks[0].empty() && ((toks[0][0] >= 'a' && toks[0][0] <= 'z') || (toks[0][0] >= 'A' && toks[0][0] <= 'Z'));
    if (word) {
      const std::string first(toks[0]);
      throw InputError(w, fmt::format("expected 'SRC DST', 'nodes N', 'directed' or 'undirected', got '{}'", first),
                       suggest(first, {"nodes", "directed", "undirected"}));
    }
    if (toks.size() != 2) {
      throw InputError(w, fmt::format("expected 'SRC DST' (two node indices), got {} tokens", toks.size()));
    }
    const auto a = parse_index(toks[0]);
    const auto b = parse_index(toks[1]);
    if (!a || *a >= kMaxNodes) throw InputError(w, fmt::format("expected a node index, got '{}'", toks[0]));
    if (!b || *b >= kMaxNodes) throw InputError(w, fmt::format("expected a node index, got '{}'", toks[1]));
    edges.push_back({static_cast<NodeIndex>(*a), static_cast<NodeIndex>(*b)});
    edge_lines.push_back(line_no);
    max_index = std::max({max_index, *a, *b});
  }
  if (declared_nodes >= 0) {
    for (size_t k = 0; k < edges.size(); ++k) {
      const int64_t bad = std::max(edges[k].from, edges[k].to);
      if (bad >= declared_nodes) {
        throw InputError(Where{file, edge_lines[k], ""},
                         fmt::format("node {} is out of range: 'nodes {}' on line {} allows 0..{}", bad,
                                     declared_nodes, nodes_line, declared_nodes - 1));
      }
    }
  } else if (edges.empty()) {
    throw InputError(Where{file, 0, ""}, "the edge list has no edges and no 'nodes N' line");
  }
  const NodeIndex n = static_cast<NodeIndex>(declared_nodes >= 0 ? declared_nodes : max_index + 1);
  if (undirected) {
    const size_t m = edges.size();
    for (size_t k = 0; k < m; ++k) edges.push_back({edges[k].to, edges[k].from});
  }
  return Graph(n, std::move(edges), "file:" + file);
}

Graph read_edge_list(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where{path, 0, ""}, "cannot open the edge-list file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_edge_list(ss.str(), path);
}

// ---------------------------------------------------------------------------------------------------
// Topology specs

namespace {

struct Family {
  const char* name;
  const char* usage;
};

// Canonical names first; aliases map to them in canonical().
constexpr Family kFamilies[] = {
    {"ring", "ring:N"},
    {"directed-ring", "directed-ring:N[:chords=A-B,C-D...]"},
    {"torus", "torus:RxC"},
    {"grid", "grid:RxC"},
    {"exponential", "exponential:N"},
    {"one-peer-exponential", "one-peer-exponential:N"},
    {"hypercube", "hypercube:N"},
    {"erdos-renyi", "erdos-renyi:N:P[:seed=S]"},
    {"random-strongly-connected", "random-strongly-connected:N:P[:seed=S]"},
    {"star", "star:N"},
    {"complete", "complete:N"},
    {"file", "file:PATH"},
};

std::string canonical(const std::string& name) {
  if (name == "dring") return "directed-ring";
  if (name == "exp" || name == "static-exponential") return "exponential";
  if (name == "one-peer-exp" || name == "one-peer") return "one-peer-exponential";
  if (name == "er") return "erdos-renyi";
  if (name == "strongly-connected" || name == "random-digraph") return "random-strongly-connected";
  return name;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

class SpecParser {
 public:
  SpecParser(std::string_view spec, const Where& where) : spec_(spec), where_(where) {}

  [[noreturn]] void fail(const std::string& message, const std::string& usage) const {
    throw InputError(where_, fmt::format("{} in topology '{}'", message, spec_), "expected " + usage);
  }

  int64_t integer(std::string_view tok, const char* what, const std::string& usage) const {
    const auto v = parse_index(tok);
    if (!v) fail(fmt::format("expected {} (a whole number), got '{}'", what, tok), usage);
    if (*v > kMaxNodes) fail(fmt::format("{} {} is above the limit of {}", what, *v, kMaxNodes), usage);
    return *v;
  }

  NodeIndex count(std::string_view tok, const std::string& usage) const {
    return static_cast<NodeIndex>(integer(tok, "a node count", usage));
  }

  double probability(std::string_view tok, const std::string& usage) const {
    const std::string s(tok);
    char* end = nullptr;
    errno = 0;
    const double p = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !(p >= 0.0 && p <= 1.0)) {
      fail(fmt::format("expected an edge probability in [0, 1], got '{}'", s), usage);
    }
    return p;
  }

  std::pair<NodeIndex, NodeIndex> dims(std::string_view tok, const std::string& usage) const {
    const size_t x = tok.find('x');
    if (x == std::string_view::npos) fail(fmt::format("expected ROWSxCOLS, got '{}'", tok), usage);
    return {count(tok.substr(0, x), usage), count(tok.substr(x + 1), usage)};
  }

  std::string_view spec_;
  Where where_;
};

}  // namespace

std::vector<std::string> topology_names() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.name);
  return out;
}

GraphSequence parse_topology(std::string_view spec_in, const Where& where) {
  const std::string_view spec = trim(spec_in);
  const size_t colon = spec.find(':');
  const std::string raw_name = to_lower(spec.substr(0, colon));
  const std::string name = canonical(raw_name);
  const Family* family = nullptr;
  for (const Family& f : kFamilies) {
    if (name == f.name) family = &f;
  }
  if (family == nullptr) {
    throw InputError(where, fmt::format("unknown topology '{}' in '{}'", raw_name, spec), suggest(raw_name, topology_names()));
  }
  const std::string usage = family->usage;
  const SpecParser p(spec, where);
  if (name == "file") {
    if (colon == std::string_view::npos || colon + 1 == spec.size()) p.fail("missing the path", usage);
    return GraphSequence(read_edge_list(std::string(spec.substr(colon + 1))));
  }
  // Positional arguments, then key=value options.
  std::vector<std::string_view> args;
  std::vector<std::pair<std::string_view, std::string_view>> options;
  if (colon != std::string_view::npos) {
    for (std::string_view part : split(spec.substr(colon + 1), ':')) {
      const size_t eq = part.find('=');
      if (eq != std::string_view::npos) {
        options.emplace_back(part.substr(0, eq), part.substr(eq + 1));
      } else {
        if (!options.empty()) p.fail(fmt::format("positional argument '{}' after an option", part), usage);
        args.push_back(part);
      }
    }
  }
  std::vector<std::string> allowed_keys;
  if (name == "erdos-renyi" || name == "random-strongly-connected") allowed_keys = {"seed"};
  if (name == "directed-ring") allowed_keys = {"chords"};
  for (const auto& [key, value] : options) {
    const std::string k(key);
    if (std::find(allowed_keys.begin(), allowed_keys.end(), k) == allowed_keys.end()) {
      throw InputError(where, fmt::format("unknown option '{}' for {} in '{}'", k, name, spec),
                       allowed_keys.empty() ? "expected " + usage : suggest(k, allowed_keys));
    }
  }
  auto option = [&](const char* key) -> std::optional<std::string_view> {
    for (const auto& [k, v] : options) {
      if (k == key) return v;
    }
    return std::nullopt;
  };
  const size_t want = (name == "erdos-renyi" || name == "random-strongly-connected") ? 2 : 1;
  if (args.size() != want) {
    p.fail(fmt::format("expected {} argument{} after '{}:', got {}", want, want == 1 ? "" : "s", name, args.size()), usage);
  }
  const Where w = where;
  if (name == "ring") return GraphSequence(ring(p.count(args[0], usage), w));
  if (name == "directed-ring") {
    std::vector<Edge> chords;
    if (const auto c = option("chords")) {
      for (std::string_view pair : split(*c, ',')) {
        const size_t dash = pair.find('-');
        if (dash == std::string_view::npos) p.fail(fmt::format("expected a chord as A-B, got '{}'", pair), usage);
        chords.push_back({static_cast<NodeIndex>(p.integer(pair.substr(0, dash), "a node index", usage)),
                          static_cast<NodeIndex>(p.integer(pair.substr(dash + 1), "a node index", usage))});
      }
    }
    return GraphSequence(directed_ring_with_chords(p.count(args[0], usage), chords, w));
  }
  if (name == "torus") {
    const auto [r, c] = p.dims(args[0], usage);
    return GraphSequence(torus(r, c, w));
  }
  if (name == "grid") {
    const auto [r, c] = p.dims(args[0], usage);
    return GraphSequence(grid(r, c, w));
  }
  if (name == "exponential") return GraphSequence(static_exponential(p.count(args[0], usage), w));
  if (name == "one-peer-exponential") return one_peer_exponential(p.count(args[0], usage), w);
  if (name == "hypercube") return GraphSequence(hypercube(p.count(args[0], usage), w));
  if (name == "star") return GraphSequence(star(p.count(args[0], usage), w));
  if (name == "complete") return GraphSequence(complete(p.count(args[0], usage), w));
  // erdos-renyi and random-strongly-connected
  const NodeIndex n = p.count(args[0], usage);
  const double prob = p.probability(args[1], usage);
  uint64_t seed = 0;
  if (const auto s = option("seed")) {
    const auto v = parse_index(*s);
    if (!v) p.fail(fmt::format("expected a non-negative integer seed, got '{}'", *s), usage);
    seed = static_cast<uint64_t>(*v);
  }
  if (name == "erdos-renyi") return GraphSequence(erdos_renyi(n, prob, seed, w));
  return GraphSequence(random_strongly_connected(n, prob, seed, w));
}

}  // namespace orrery::decentral
