#include "apps/serve/status_page.hpp"

#include "actors/cluster/cluster_config.hpp"

#include <fmt/format.h>

namespace crescent::serve {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

namespace {

using labels = prom_writer::labels;

// A table cell showing `shown` for the series `name{l}` of /metrics, whose value is `value`.
std::string cell(std::string_view name, const labels& l, double value, std::string_view shown) {
  return fmt::format("<td class=\"n\" data-series=\"{}\" data-value=\"{}\">{}</td>",
                     html_escape(prom_writer::series(name, l)), prom_writer::number(value),
                     html_escape(shown));
}

std::string count_cell(std::string_view name, const labels& l, double value) {
  return cell(name, l, value, prom_writer::number(value));
}

std::string ms_cell(std::string_view name, const labels& l, double seconds) {
  return cell(name, l, seconds, fmt::format("{:.2f} ms", seconds * 1e3));
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

const char* style = R"(body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse}th,td{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
.note{color:#666;font-size:.9em}.warn{color:#a00})";

std::string requests_section(const door_numbers& d) {
  std::string out = "<section id=\"requests\"><h2>Requests</h2><table><tr>";
  for (size_t i = 0; i < d.outcomes.size(); ++i)
    out += fmt::format("<th>{}</th>", to_string(static_cast<door_outcome>(i)));
  out += "<th>in flight</th></tr><tr>";
  for (size_t i = 0; i < d.outcomes.size(); ++i)
    out += count_cell("crescent_requests_total",
                      {{"outcome", to_string(static_cast<door_outcome>(i))}},
                      static_cast<double>(d.outcomes[i]));
  out += count_cell("crescent_requests_in_flight", {}, static_cast<double>(d.in_flight));
  out += "</tr></table>\n";

  out += "<h2>Prefix hits</h2><table><tr><th>hit rate</th><th>local hit tokens</th>"
         "<th>remote hit tokens</th><th>SSD hit tokens</th><th>prompt tokens</th><th>computed "
         "tokens</th></tr><tr>";
  out += fmt::format("<td class=\"n\" id=\"hit-rate\" data-value=\"{}\">{:.1f}%</td>",
                     prom_writer::number(d.hit_rate()), 100 * d.hit_rate());
  out += count_cell("crescent_prefix_hit_tokens_total", {{"tier", "local"}},
                    static_cast<double>(d.local_hit_tokens));
  out += count_cell("crescent_prefix_hit_tokens_total", {{"tier", "remote"}},
                    static_cast<double>(d.remote_hit_tokens));
  out += count_cell("crescent_prefix_hit_tokens_total", {{"tier", "ssd"}},
                    static_cast<double>(d.ssd_hit_tokens));
  out += count_cell("crescent_prompt_tokens_total", {}, static_cast<double>(d.prompt_tokens));
  out += count_cell("crescent_prefill_computed_tokens_total", {},
                    static_cast<double>(d.computed_tokens));
  out += "</tr></table>\n<p class=\"note\">Hit rate: prompt tokens whose KV was reused from the "
         "pool, over the prompt tokens of completed requests.</p>\n";

  out += "<h2>Recent latency</h2><table><tr><th></th><th>p50</th><th>p99</th>"
         "<th>over the last</th><th>requests in all</th></tr>";
  auto row = [&](const char* what, const char* name, const latency_summary& s) {
    out += fmt::format("<tr><th>{}</th>", what);
    out += ms_cell(name, {{"quantile", "0.5"}}, s.recent.p50);
    out += ms_cell(name, {{"quantile", "0.99"}}, s.recent.p99);
    out += fmt::format("<td class=\"n\">{}</td>", s.recent.count);
    out += count_cell(fmt::format("{}_count", name), {}, static_cast<double>(s.count));
    out += "</tr>";
  };
  row("TTFT", "crescent_recent_ttft_seconds", d.ttft);
  row("TBT", "crescent_recent_tbt_seconds", d.tbt);
  out += fmt::format("</table>\n<p class=\"note\">Quantiles over the last {} completed "
                     "requests; a request's TBT is the mean of its longest 10% of token "
                     "intervals.</p></section>\n",
                     recent_requests);
  return out;
}

// One row a node: where it runs, its instances, its pool's DRAM (its block owner's numbers).
std::string nodes_table(const cluster_config& cfg, const cluster_numbers& c) {
  std::string out;
  out += "<h2>Nodes</h2><table><tr><th>node</th><th>where</th><th>instances</th>"
         "<th>pool DRAM used</th><th>pool DRAM capacity</th><th>blocks</th><th>evictions</th>"
         "</tr>\n";
  for (size_t n = 0; n < cfg.nodes.size(); ++n) {
    const auto& node = cfg.nodes[n];
    std::string instances;
    for (const auto& w : c.workers)
      if (w.node == n)
        instances += fmt::format("{}{} {}", instances.empty() ? "" : ", ", w.role, w.instance);
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>", n,
                       node.hosted_elsewhere() ? html_escape(node.address) : "this process",
                       instances.empty() ? "none" : instances);
    const owner_numbers* owner = nullptr;
    for (const auto& o : c.owners)
      if (o.node == n)
        owner = &o;
    if (owner) {
      const labels dram{{"node", std::to_string(n)}, {"tier", "dram"}};
      const labels node_label{{"node", std::to_string(n)}};
      out +=
          cell("crescent_pool_used_bytes", dram, double(owner->dram_used), mib(owner->dram_used));
      out +=
          cell("crescent_pool_capacity_bytes", dram, double(owner->dram_cap), mib(owner->dram_cap));
      out += count_cell("crescent_pool_blocks", node_label, double(owner->blocks));
      out += count_cell("crescent_pool_evictions_total", node_label, double(owner->evictions));
    } else {
      out += "<td colspan=\"4\" class=\"warn\">its block owner did not answer</td>";
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  return out;
}

// One row an instance: its own numbers beside what the conductor believes of it.
std::string instances_table(const cluster_numbers& c) {
  std::string out;
  out += "<h2>Instances</h2><table><tr><th>role</th><th>instance</th><th>node</th>"
         "<th>queued jobs</th><th>active requests</th><th>conductor's count</th>"
         "<th>predicted queue</th>"
         "<th>free KV pages</th><th>compute</th><th>load misses</th><th>codec errors</th></tr>\n";
  for (const auto& w : c.workers) {
    const labels l{{"role", w.role}, {"instance", std::to_string(w.instance)}};
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>", w.role, w.instance, w.node);
    out += count_cell("crescent_instance_queued_jobs", l, w.queued);
    out += count_cell("crescent_instance_active_requests", l, w.active);
    // What the conductor believes: queued jobs of a prefill instance, requests of a decode one.
    const labels at{{"instance", std::to_string(w.instance)}};
    if (c.conductor && w.role == "prefill" && w.instance < c.conductor->prefill_queue_jobs.size())
      out += count_cell("crescent_conductor_prefill_queue_jobs", at,
                        c.conductor->prefill_queue_jobs[w.instance]);
    else if (c.conductor && w.role == "decode" && w.instance < c.conductor->decode_active.size())
      out += count_cell("crescent_conductor_decode_active", at,
                        c.conductor->decode_active[w.instance]);
    else
      out += "<td></td>";
    // The conductor's predicted queue time of a prefill instance.
    if (c.conductor && w.role == "prefill" && w.instance < c.conductor->prefill_queue_s.size()) {
      const double s = c.conductor->prefill_queue_s[w.instance];
      out += cell("crescent_conductor_prefill_queue_seconds", at, s, fmt::format("{:.3f} s", s));
    } else {
      out += "<td></td>";
    }
    out += count_cell("crescent_instance_free_kv_pages", l, w.free_pages);
    const double compute_s = static_cast<double>(w.compute_ns) / 1e9;
    out += cell("crescent_instance_compute_seconds_total", l, compute_s,
                fmt::format("{:.3f} s", compute_s));
    out += count_cell("crescent_instance_load_misses_total", l, double(w.load_misses));
    out += count_cell("crescent_instance_codec_errors_total", l, double(w.codec_errors));
    out += "</tr>\n";
  }
  out += "</table>";
  return out;
}

std::string cluster_section(const cluster_config& cfg, const cluster_numbers& c) {
  std::string out = "<section id=\"cluster\"><h2>Cluster</h2>";
  if (c.conductor)
    out += fmt::format(
        "<table><tr><th>nodes</th><th>live nodes</th><th>placed</th><th>rejected</th></tr>"
        "<tr><td class=\"n\">{}</td>{}{}{}</tr></table>\n",
        cfg.nodes.size(), count_cell("crescent_live_nodes", {}, c.conductor->live_nodes),
        count_cell("crescent_conductor_placed_total", {}, double(c.conductor->placed)),
        count_cell("crescent_conductor_rejected_total", {}, double(c.conductor->rejected)));
  else
    out += "<p class=\"warn\">The conductor did not answer in time.</p>\n";
  if (c.unanswered > 0)
    out += fmt::format("<p class=\"warn\">{} actors did not answer in time; their numbers are "
                       "missing.</p>\n",
                       c.unanswered);
  out += nodes_table(cfg, c) + instances_table(c) + "</section>\n";
  return out;
}

} // namespace

std::string status_page(const status_inputs& in) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<title>crescent serve</title>";
  if (in.refresh_s > 0)
    out += fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">", in.refresh_s);
  out += fmt::format("<style>{}</style></head>\n<body><h1>crescent serve</h1>"
                     "<p class=\"note\">model <b>{}</b>; the same numbers as <a "
                     "href=\"/metrics\">/metrics</a>{}.</p>\n",
                     style, html_escape(in.model),
                     in.refresh_s > 0 ? fmt::format(", reloaded every {} s", in.refresh_s)
                                      : std::string{});
  out += requests_section(in.door);
  if (in.config)
    out += cluster_section(*in.config, in.cluster);
  out += "</body></html>\n";
  return out;
}

} // namespace crescent::serve
