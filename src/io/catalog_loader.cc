#include "io/catalog_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "core/strings.h"
#include "io/atomic_file.h"
#include "io/embedded_catalog.h"
#include "io/hf_config.h"
#include "io/yaml_util.h"

namespace orrery::io {
namespace fs = std::filesystem;

namespace {

void check_name(const std::string& name, const Where& where) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
  });
  if (!ok) throw InputError(where, "expected a lowercase id of [a-z0-9.-_], got '" + name + "'");
}

std::string req_source(Fields& f) {
  std::string s = f.req_string("source");
  if (trim(s).empty()) throw InputError(f.where_of_key("source"), "must name the document the figures come from");
  return s;
}

hw::ScaleupLink read_scaleup(const YAML::Node& n, const Where& w) {
  Fields f(n, w);
  hw::ScaleupLink s;
  s.technology = f.req_string("technology");
  s.links = static_cast<int>(f.opt_int("links").value_or(0));
  s.bandwidth_per_direction = f.req_bandwidth("bandwidth_per_direction");
  f.finish();
  return s;
}

hw::PcieLink read_pcie(const YAML::Node& n, const Where& w) {
  Fields f(n, w);
  hw::PcieLink p;
  p.generation = static_cast<int>(f.req_positive_int("generation"));
  p.lanes = static_cast<int>(f.opt_int("lanes").value_or(16));
  p.bandwidth_per_direction = f.req_bandwidth("bandwidth_per_direction");
  f.finish();
  return p;
}

hw::GpuSpec read_gpu(const YAML::Node& n, const Where& w, const std::string& file) {
  Fields f(n, w);
  hw::GpuSpec g;
  g.name = f.req_string("name");
  check_name(g.name, f.where_of_key("name"));
  g.display_name = f.opt_string("display_name").value_or(g.name);
  g.vendor = f.req_string("vendor");
  g.architecture = f.opt_string("architecture").value_or("");
  g.memory = f.req_bytes("memory");
  g.memory_bandwidth = f.req_bandwidth("memory_bandwidth");
  {
    const YAML::Node flops = f.req_node("flops");
    Fields ff(flops, f.where_of_key("flops"));
    for (const auto& kv : flops) {
      const std::string dt = kv.first.as<std::string>();
      if (!hw::parse_dtype(dt)) {
        Where kw = ff.where().with_key(dt);
        kw.line = kv.first.Mark().line + 1;
        throw InputError(kw, "unknown dtype '" + dt + "'", suggest(dt, hw::dtype_names()));
      }
    }
    bool any = false;
    for (hw::DType d : hw::kAllDTypes) {
      const std::string key(hw::dtype_name(d));
      const YAML::Node& cflops = flops;
      if (cflops[key]) {
        g.peak_flops[static_cast<size_t>(d)] = ff.req_flop_rate(key);
        any = true;
      }
    }
    if (!any) throw InputError(f.where_of_key("flops"), "expected at least one dtype, e.g. 'bf16: 989.4 TFLOP/s'");
  }
  if (auto s = f.opt_node("scaleup")) g.scaleup = read_scaleup(*s, f.where_of_key("scaleup"));
  g.pcie = read_pcie(f.req_node("pcie"), f.where_of_key("pcie"));
  if (auto h = f.opt_node("host_link")) {
    Fields hf(*h, f.where_of_key("host_link"));
    g.host_link = hw::HostLink{hf.req_string("technology"), hf.req_bandwidth("bandwidth_per_direction")};
    hf.finish();
  }
  g.tdp = f.req_power("tdp");
  g.power_limit = f.opt_power("power_limit");
  if (g.power_limit && g.power_limit->watts() > g.tdp.watts()) {
    throw InputError(f.where_of_key("power_limit"),
                     fmt::format("a power limit of {:.0f} W is above the tdp of {:.0f} W", g.power_limit->watts(),
                                 g.tdp.watts()),
                     "a cap may only lower the board power");
  }
  g.form_factor = f.opt_string("form_factor").value_or("");
  g.source = req_source(f);
  g.origin = file;
  f.finish();
  return g;
}

hw::NodeSpec read_node(const YAML::Node& n, const Where& w, const std::string& file) {
  Fields f(n, w);
  hw::NodeSpec s;
  s.name = f.req_string("name");
  check_name(s.name, f.where_of_key("name"));
  s.display_name = f.opt_string("display_name").value_or(s.name);
  s.gpu = f.req_string("gpu");
  s.gpus_per_node = static_cast<int>(f.req_positive_int("gpus_per_node"));
  s.scaleup_domain_gpus = static_cast<int>(f.opt_int("scaleup_domain_gpus").value_or(s.gpus_per_node));
  if (s.scaleup_domain_gpus < 1) throw InputError(f.where_of_key("scaleup_domain_gpus"), "must be a positive integer");
  const std::string intra = f.req_string("intra_node");
  const auto k = hw::parse_intra_node(intra);
  if (!k) {
    throw InputError(f.where_of_key("intra_node"), "unknown intra-node fabric '" + intra + "'",
                     suggest(intra, {"nvswitch", "pcie", "xgmi-mesh", "nvlink-pairs"}));
  }
  s.intra_node = *k;
  {
    Fields nf(f.req_node("nics"), f.where_of_key("nics"));
    s.nics.count = static_cast<int>(nf.req_int("count"));
    if (s.nics.count < 0) throw InputError(nf.where_of_key("count"), "must not be negative");
    s.nics.interconnect = nf.req_string("interconnect");
    s.nics.bandwidth = nf.req_bandwidth("bandwidth");
    nf.finish();
  }
  s.pcie = read_pcie(f.req_node("pcie"), f.where_of_key("pcie"));
  s.host_memory = f.req_bytes("host_memory");
  s.cpus = f.opt_string("cpus").value_or("");
  s.source = req_source(f);
  s.origin = file;
  f.finish();
  return s;
}

hw::InterconnectSpec read_interconnect(const YAML::Node& n, const Where& w, const std::string& file) {
  Fields f(n, w);
  hw::InterconnectSpec s;
  s.name = f.req_string("name");
  check_name(s.name, f.where_of_key("name"));
  s.display_name = f.opt_string("display_name").value_or(s.name);
  s.kind = f.req_string("kind");
  if (s.kind != "infiniband" && s.kind != "roce" && s.kind != "ethernet") {
    throw InputError(f.where_of_key("kind"), "unknown kind '" + s.kind + "'",
                     suggest(s.kind, {"infiniband", "roce", "ethernet"}));
  }
  s.bandwidth = f.req_bandwidth("bandwidth");
  s.switch_latency = f.opt_time("switch_latency");
  s.nic_latency = f.opt_time("nic_latency");
  s.source = req_source(f);
  s.origin = file;
  f.finish();
  return s;
}

hw::PriceSpec read_price(const YAML::Node& n, const Where& w, const std::string& file) {
  Fields f(n, w);
  hw::PriceSpec p;
  p.gpu = f.req_string("gpu");
  p.usd_per_gpu_hour = f.req_double("usd_per_gpu_hour");
  if (!(p.usd_per_gpu_hour > 0)) throw InputError(f.where_of_key("usd_per_gpu_hour"), "must be positive");
  p.kind = f.opt_string("kind").value_or("on-demand");
  p.provider = f.req_string("provider");
  p.date = f.req_string("date");
  p.source = req_source(f);
  p.origin = file;
  f.finish();
  return p;
}

template <class Reader, class Adder>
void read_list(const YAML::Node& root, const std::string& key, const std::string& file, Reader read, Adder add) {
  const YAML::Node& croot = root;
  const YAML::Node list = croot[key];
  if (!list || list.IsNull()) return;
  if (!list.IsSequence()) throw InputError(where_of(list, file, key), "expected a list of entries");
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const Where w = where_of(list[i], file, fmt::format("{}[{}]", key, i));
    auto entry = read(list[i], w, file);
    std::string name;
    if constexpr (std::is_same_v<decltype(entry), hw::PriceSpec>) {
      name = entry.gpu;
    } else {
      name = entry.name;
    }
    if (!seen.insert(name).second) {
      throw InputError(w, "duplicate entry '" + name + "' in the same file");
    }
    add(std::move(entry));
  }
}

void add_model_file(Catalog& c, const std::string& name, std::string origin, std::string text) {
  c.add_model(ModelEntry{name, std::move(origin), std::move(text)});
}

void load_path(Catalog& c, const std::string& path, const Where& where) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    std::vector<fs::path> yamls, jsons;
    for (const auto& dir : {p, p / "models"}) {
      if (!fs::is_directory(dir, ec)) continue;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string ext = e.path().extension().string();
        if (dir == p && (ext == ".yaml" || ext == ".yml")) yamls.push_back(e.path());
        if (ext == ".json") jsons.push_back(e.path());
      }
    }
    std::sort(yamls.begin(), yamls.end());
    std::sort(jsons.begin(), jsons.end());
    for (const auto& y : yamls) add_catalog_yaml(c, read_file(y.string()), y.string());
    for (const auto& j : jsons) add_model_file(c, j.stem().string(), j.string(), read_file(j.string()));
    for (const auto& f : yamls) c.loaded.push_back(f.string());
    for (const auto& f : jsons) c.loaded.push_back(f.string());
    return;
  }
  if (!fs::exists(p, ec)) throw InputError(where, "catalog path '" + path + "' does not exist");
  const std::string ext = p.extension().string();
  if (ext == ".yaml" || ext == ".yml") {
    add_catalog_yaml(c, read_file(path), path);
  } else if (ext == ".json") {
    add_model_file(c, p.stem().string(), path, read_file(path));
  } else {
    throw InputError(where, "catalog path '" + path + "': expected a .yaml/.yml file, a config .json or a folder");
  }
  c.loaded.push_back(path);
}

}  // namespace

std::vector<std::string> Catalog::model_names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : models_) out.push_back(k);
  return out;
}

model::ModelSpec Catalog::model(std::string_view name_or_path, const Where& where) const {
  if (auto it = models_.find(name_or_path); it != models_.end()) {
    return parse_hf_config(it->second.text, it->second.origin);
  }
  std::error_code ec;
  if (fs::is_regular_file(fs::path(name_or_path), ec)) return read_hf_config(std::string(name_or_path));
  throw InputError(where, "unknown model '" + std::string(name_or_path) + "' (not a catalog name nor a file)",
                   suggest(name_or_path, model_names()));
}

void add_catalog_yaml(Catalog& c, std::string_view text, const std::string& file) {
  const YAML::Node root = load_yaml(text, file);
  if (!root || root.IsNull()) return;  // an empty file adds nothing
  if (!root.IsMap()) throw InputError(where_of(root, file, ""), "expected a mapping with gpus/nodes/interconnects/prices");
  static const std::vector<std::string> kTop = {"gpus", "nodes", "interconnects", "prices"};
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (std::find(kTop.begin(), kTop.end(), k) == kTop.end()) {
      throw InputError(where_of(kv.first, file, k), "unknown top-level key '" + k + "'", suggest(k, kTop));
    }
  }
  read_list(root, "gpus", file, read_gpu, [&](hw::GpuSpec g) { c.hw.add_gpu(std::move(g)); });
  read_list(root, "nodes", file, read_node, [&](hw::NodeSpec n) { c.hw.add_node(std::move(n)); });
  read_list(root, "interconnects", file, read_interconnect,
            [&](hw::InterconnectSpec i) { c.hw.add_interconnect(std::move(i)); });
  read_list(root, "prices", file, read_price, [&](hw::PriceSpec p) { c.hw.add_price(std::move(p)); });
}

Catalog load_catalog(const CatalogOptions& options) {
  Catalog c;
  if (options.builtin) {
    for (const EmbeddedFile& f : embedded_catalog()) {
      const std::string origin = "builtin:" + std::string(f.path);
      if (f.path.ends_with(".json")) {
        const std::string name = fs::path(std::string(f.path)).stem().string();
        add_model_file(c, name, origin, std::string(f.text));
      } else {
        add_catalog_yaml(c, f.text, origin);
      }
      c.loaded.push_back(origin);
    }
  }
  std::vector<std::pair<std::string, Where>> paths;
  if (options.use_environment) {
    if (const char* env = std::getenv("ORRERY_CATALOG"); env != nullptr && *env != '\0') {
      std::string_view rest(env);
      while (!rest.empty()) {
        const size_t colon = rest.find(':');
        const std::string_view part = rest.substr(0, colon);
        if (!part.empty()) paths.emplace_back(std::string(part), Where{"ORRERY_CATALOG", 0, ""});
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
      }
    }
  }
  for (const std::string& p : options.paths) paths.emplace_back(p, Where{"<command line>", 0, "--catalog"});
  for (const auto& [p, w] : paths) load_path(c, p, w);
  c.hw.check_references();
  return c;
}

}  // namespace orrery::io
