// `orrery catalog list [KIND]` and `orrery catalog show KIND NAME`.
#include <fmt/format.h>

#include "cli/app.h"
#include "cli/model_report.h"
#include "cli/output.h"
#include "core/strings.h"
#include "core/unit_parse.h"

namespace orrery::cli {
namespace {

using io::Json;

std::string opt_rate(const std::optional<FlopRate>& r) { return r ? format_flop_rate(*r) : "-"; }

Json gpu_json(const hw::GpuSpec& g) {
  Json j;
  j["name"] = g.name;
  j["display_name"] = g.display_name;
  j["vendor"] = g.vendor;
  j["architecture"] = g.architecture;
  j["memory_bytes"] = g.memory.count();
  j["memory_bandwidth_bytes_per_s"] = g.memory_bandwidth.bytes_per_second();
  Json flops = Json::object();
  for (hw::DType d : hw::kAllDTypes) {
    if (auto r = g.peak(d)) flops[std::string(hw::dtype_name(d))] = r->per_second();
  }
  j["peak_flops_per_s"] = flops;
  if (g.scaleup) {
    j["scaleup"] = {{"technology", g.scaleup->technology},
                    {"links", g.scaleup->links},
                    {"bandwidth_per_direction_bytes_per_s", g.scaleup->bandwidth_per_direction.bytes_per_second()}};
  } else {
    j["scaleup"] = nullptr;
  }
  j["pcie"] = {{"generation", g.pcie.generation},
               {"lanes", g.pcie.lanes},
               {"bandwidth_per_direction_bytes_per_s", g.pcie.bandwidth_per_direction.bytes_per_second()}};
  j["host_link"] = g.host_link ? Json{{"technology", g.host_link->technology},
                                       {"bandwidth_per_direction_bytes_per_s",
                                        g.host_link->bandwidth_per_direction.bytes_per_second()}}
                               : Json(nullptr);
  j["tdp_w"] = g.tdp.watts();
  j["power_limit_w"] = g.power_limit ? Json(g.power_limit->watts()) : Json(nullptr);
  j["form_factor"] = g.form_factor;
  j["source"] = g.source;
  j["origin"] = g.origin;
  return j;
}

Json node_json(const hw::NodeSpec& n) {
  return Json{{"name", n.name},
              {"display_name", n.display_name},
              {"gpu", n.gpu},
              {"gpus_per_node", n.gpus_per_node},
              {"scaleup_domain_gpus", n.scaleup_domain_gpus},
              {"intra_node", std::string(hw::intra_node_name(n.intra_node))},
              {"nics",
               {{"count", n.nics.count},
                {"interconnect", n.nics.interconnect},
                {"bandwidth_bytes_per_s", n.nics.bandwidth.bytes_per_second()}}},
              {"pcie",
               {{"generation", n.pcie.generation},
                {"bandwidth_per_direction_bytes_per_s", n.pcie.bandwidth_per_direction.bytes_per_second()}}},
              {"host_memory_bytes", n.host_memory.count()},
              {"cpus", n.cpus},
              {"source", n.source},
              {"origin", n.origin}};
}

Json interconnect_json(const hw::InterconnectSpec& i) {
  Json j{{"name", i.name}, {"display_name", i.display_name}, {"kind", i.kind},
         {"bandwidth_bytes_per_s", i.bandwidth.bytes_per_second()}};
  j["switch_latency_s"] = i.switch_latency ? Json(i.switch_latency->to_seconds()) : Json(nullptr);
  j["nic_latency_s"] = i.nic_latency ? Json(i.nic_latency->to_seconds()) : Json(nullptr);
  j["source"] = i.source;
  j["origin"] = i.origin;
  return j;
}

Json price_json(const hw::PriceSpec& p) {
  return Json{{"gpu", p.gpu},           {"usd_per_gpu_hour", p.usd_per_gpu_hour}, {"kind", p.kind},
              {"provider", p.provider}, {"date", p.date},                         {"source", p.source},
              {"origin", p.origin}};
}

Table gpu_table(const io::Catalog& c) {
  Table t({"name", "memory", "HBM bw", "bf16", "fp8", "scale-up/dir", "TDP", "$/GPU-h"}, "GPUs (dense peak)");
  for (const auto& [name, g] : c.hw.gpus()) {
    const hw::PriceSpec* p = c.hw.find_price(name);
    t.add_row({name, format_bytes(g.memory), format_bandwidth(g.memory_bandwidth), opt_rate(g.peak(hw::DType::kBf16)),
               opt_rate(g.peak(hw::DType::kFp8)),
               g.scaleup ? format_bandwidth(g.scaleup->bandwidth_per_direction) : "-",
               g.power_limit ? fmt::format("{:.0f} W (cap {:.0f})", g.tdp.watts(), g.power_limit->watts())
                               : fmt::format("{:.0f} W", g.tdp.watts()),
               p ? fmt::format("{:.2f}", p->usd_per_gpu_hour) : "-"});
  }
  return t;
}

Table node_table(const io::Catalog& c) {
  Table t({"name", "gpu", "gpus/node", "domain", "intra-node", "NICs", "host memory"}, "Nodes");
  for (const auto& [name, n] : c.hw.nodes()) {
    t.add_row({name, n.gpu, std::to_string(n.gpus_per_node), std::to_string(n.scaleup_domain_gpus),
               std::string(hw::intra_node_name(n.intra_node)),
               fmt::format("{} x {} ({})", n.nics.count, format_bandwidth(n.nics.bandwidth), n.nics.interconnect),
               format_bytes(n.host_memory)});
  }
  return t;
}

Table interconnect_table(const io::Catalog& c) {
  Table t({"name", "kind", "bandwidth/dir", "switch latency", "NIC latency"}, "Interconnects");
  for (const auto& [name, i] : c.hw.interconnects()) {
    t.add_row({name, i.kind, format_bandwidth(i.bandwidth), i.switch_latency ? format_time(*i.switch_latency) : "-",
               i.nic_latency ? format_time(*i.nic_latency) : "-"});
  }
  return t;
}

Table price_table(const io::Catalog& c) {
  Table t({"gpu", "$/GPU-h", "kind", "provider", "date"}, "Prices");
  for (const auto& [name, p] : c.hw.prices()) {
    t.add_row({name, fmt::format("{:.2f}", p.usd_per_gpu_hour), p.kind, p.provider, p.date});
  }
  return t;
}

const std::vector<std::string> kKinds = {"gpus", "nodes", "interconnects", "prices", "models"};

// Accepts singular or plural ("gpu", "gpus"); returns the plural.
std::string normalize_kind(const std::string& kind, const std::string& flag) {
  for (const std::string& k : kKinds) {
    if (kind == k || kind + "s" == k) return k;
  }
  throw InputError(Where{"<command line>", 0, flag}, "unknown catalog kind '" + kind + "'",
                   suggest(kind, {"gpu", "node", "interconnect", "price", "model"}));
}

}  // namespace

void register_catalog_commands(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cat = app.add_subcommand("catalog", "list and show GPUs, nodes, interconnects, prices and models");
  cat->require_subcommand(1);

  auto kind = std::make_shared<std::string>("all");
  CLI::App* list = cat->add_subcommand("list", "list catalog entries (all kinds, or one)");
  list->add_option("kind", *kind, "gpus | nodes | interconnects | prices | models | all")->type_name("KIND");
  actions.emplace_back(list, [kind](Context& ctx) {
    const io::Catalog& c = ctx.catalog();
    const std::string k = *kind == "all" ? "all" : normalize_kind(*kind, "KIND");
    const bool all = k == "all";
    if (ctx.global.json) {
      Json j = envelope("catalog list");
      if (all || k == "gpus") {
        Json a = Json::array();
        for (const auto& [n, g] : c.hw.gpus()) a.push_back(gpu_json(g));
        j["gpus"] = a;
      }
      if (all || k == "nodes") {
        Json a = Json::array();
        for (const auto& [n, v] : c.hw.nodes()) a.push_back(node_json(v));
        j["nodes"] = a;
      }
      if (all || k == "interconnects") {
        Json a = Json::array();
        for (const auto& [n, v] : c.hw.interconnects()) a.push_back(interconnect_json(v));
        j["interconnects"] = a;
      }
      if (all || k == "prices") {
        Json a = Json::array();
        for (const auto& [n, v] : c.hw.prices()) a.push_back(price_json(v));
        j["prices"] = a;
      }
      if (all || k == "models") j["models"] = model_list_json(c);
      ctx.out << io::dump_json(j);
      return;
    }
    std::string sep;
    if (all || k == "gpus") { ctx.out << sep << gpu_table(c).render(); sep = "\n"; }
    if (all || k == "nodes") { ctx.out << sep << node_table(c).render(); sep = "\n"; }
    if (all || k == "interconnects") { ctx.out << sep << interconnect_table(c).render(); sep = "\n"; }
    if (all || k == "prices") { ctx.out << sep << price_table(c).render(); sep = "\n"; }
    if (all || k == "models") { ctx.out << sep << model_list_table(c).render(); }
  });

  struct ShowArgs {
    std::string kind;
    std::string name;
    int64_t seq = 4096;
  };
  auto args = std::make_shared<ShowArgs>();
  CLI::App* show = cat->add_subcommand("show", "show one entry in full, with its source");
  show->add_option("kind", args->kind, "gpu | node | interconnect | price | model")->required()->type_name("KIND");
  show->add_option("name", args->name, "entry name (see `orrery catalog list`), or a config.json path for models")
      ->required()
      ->type_name("NAME");
  show->add_option("--seq", args->seq, "sequence length for a model's FLOP and activation figures")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  actions.emplace_back(show, [args, show](Context& ctx) {
    const io::Catalog& c = ctx.catalog();
    const std::string k = normalize_kind(args->kind, "KIND");
    const Where w{"<command line>", 0, "NAME"};
    Json j;
    if (k == "gpus") j = gpu_json(c.hw.get_gpu(args->name, w));
    if (k == "nodes") j = node_json(c.hw.get_node(args->name, w));
    if (k == "interconnects") j = interconnect_json(c.hw.get_interconnect(args->name, w));
    if (k == "prices") {
      const hw::PriceSpec* p = c.hw.find_price(args->name);
      if (p == nullptr) throw InputError(w, "no price for GPU '" + args->name + "'", suggest(args->name, c.hw.gpu_names()));
      j = price_json(*p);
    }
    if (k == "models") {
      show_model(ctx, c, args->name, args->seq, show->count("--seq") > 0);
      return;
    }
    if (ctx.global.json) {
      Json e = envelope("catalog show");
      e["kind"] = k.substr(0, k.size() - 1);
      e["entry"] = j;
      ctx.out << io::dump_json(e);
      return;
    }
    // Readable form: one "key  value" row per field, nested objects flattened with dots.
    Table t({"field", "value"});
    std::function<void(const std::string&, const Json&)> flatten = [&](const std::string& prefix, const Json& v) {
      if (v.is_object()) {
        for (const auto& [kk, vv] : v.items()) flatten(prefix.empty() ? kk : prefix + "." + kk, vv);
      } else if (v.is_string()) {
        t.add_row({prefix, v.get<std::string>()});
      } else {
        t.add_row({prefix, v.dump()});
      }
    };
    flatten("", j);
    ctx.out << t.render();
  });
}

}  // namespace orrery::cli
