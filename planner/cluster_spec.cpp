#include "planner/cluster_spec.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "framework/config_reader.h"
#include "framework/error.h"

namespace ternion {

namespace {

// One YAML map of the description: its keys are read once each, and any other key is refused.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, const std::string& source)
      : node_(node), path_(std::move(path)), source_(source) {
    if (!node_ || !node_.IsMap())
      fail(node_, (path_.empty() ? "the cluster description" : path_) + ": must be a map of keys");
    // As a training config is read: a key given twice is refused, not the first one used.
    check_unique_keys(source_, node_, "key");
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    const std::string line =
        at && at.Mark().line >= 0 ? ":" + std::to_string(at.Mark().line + 1) : "";
    TN_THROW(ConfigError, source_, line, ": ", message);
  }

  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  YAML::Node child(const char* key, bool required) {
    seen_.insert(key);
    const YAML::Node& node = node_;  // the const operator[] does not add the key
    YAML::Node value = node[key];
    if (!value && required) fail(node_, name(key) + ": is required");
    return value;
  }

  double number(const char* key, bool required, double fallback, bool allow_zero = false) {
    const YAML::Node value = child(key, required);
    if (!value) return fallback;
    double parsed = 0;
    if (!value.IsScalar() || value.Tag() == "!" || !YAML::convert<double>::decode(value, parsed) ||
        !std::isfinite(parsed))
      fail(value, name(key) + ": expected a number, got '" +
                      (value.IsScalar() ? value.Scalar() : std::string("a collection")) + "'");
    if (parsed < 0 || (parsed == 0 && !allow_zero))
      fail(value, name(key) + ": must be " + (allow_zero ? "zero or more" : "positive") +
                      ", got " + value.Scalar());
    return parsed;
  }

  std::int64_t whole(const char* key, std::int64_t most) {
    const double value = number(key, true, 0);
    if (value > static_cast<double>(most))
      fail(child(key, true), name(key) + ": must be at most " + std::to_string(most) + ", got " +
                                 child(key, true).Scalar());
    if (value != std::floor(value))
      fail(child(key, true),
           name(key) + ": must be a whole number, got " + child(key, true).Scalar());
    return static_cast<std::int64_t>(value);
  }

  std::string text(const char* key) {
    const YAML::Node value = child(key, false);
    if (!value) return "";
    if (!value.IsScalar()) fail(value, name(key) + ": expected a string");
    return value.Scalar();
  }

  // Refuses the keys nobody read.
  void finish() const {
    for (const auto& entry : node_) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "(a collection)";
      if (seen_.count(key) == 0) fail(entry.first, name(key.c_str()) + ": unknown key");
    }
  }

 private:
  YAML::Node node_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> seen_;
};

LinkSpec read_link(MapReader& cluster, const char* key, bool required,
                   const std::string& source) {
  LinkSpec link;
  const YAML::Node node = cluster.child(key, required);
  if (!node) return link;
  MapReader reader(node, std::string("cluster.") + key, source);
  link.bandwidth_gb_s = reader.number("bandwidth_gb_s", true, 0);
  link.latency_us = reader.number("latency_us", false, 0, /*allow_zero=*/true);
  reader.finish();
  return link;
}

}  // namespace

ClusterSpec ClusterSpec::parse(const std::string& yaml, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    TN_THROW(ConfigError, source_name, ":", e.mark.line + 1, ": ", e.msg);
  }
  ClusterSpec spec;
  spec.source = source_name;
  MapReader top(root, "", source_name);
  MapReader cluster(top.child("cluster", true), "cluster", source_name);
  top.finish();
  spec.nodes = cluster.whole("nodes", kMaxClusterGpus);
  spec.gpus_per_node = cluster.whole("gpus_per_node", kMaxClusterGpus);
  // Each within the cap, so the product fits; the search is linear in it.
  if (spec.nodes * spec.gpus_per_node > kMaxClusterGpus)
    cluster.fail(cluster.child("gpus_per_node", true),
                 "cluster.nodes x cluster.gpus_per_node: " + std::to_string(spec.nodes) + " x " +
                     std::to_string(spec.gpus_per_node) + " GPUs, more than the " +
                     std::to_string(kMaxClusterGpus) + " the planner plans for");

  MapReader gpu(cluster.child("gpu", true), "cluster.gpu", source_name);
  spec.gpu.name = gpu.text("name");
  spec.gpu.peak_tflops = gpu.number("peak_tflops", true, 0);
  spec.gpu.fp32_peak_tflops = gpu.number("fp32_peak_tflops", false, 0, /*allow_zero=*/true);
  spec.gpu.memory_gb = gpu.number("memory_gb", true, 0);
  spec.gpu.memory_bandwidth_gb_s = gpu.number("memory_bandwidth_gb_s", true, 0);
  spec.gpu.gemm_efficiency = gpu.number("gemm_efficiency", false, spec.gpu.gemm_efficiency);
  if (spec.gpu.gemm_efficiency > 1)
    gpu.fail(gpu.child("gemm_efficiency", false),
             "cluster.gpu.gemm_efficiency: a fraction of the peak, at most 1");
  spec.gpu.overlap_cost = gpu.number("overlap_cost", false, 0, /*allow_zero=*/true);
  if (spec.gpu.overlap_cost > 1)
    gpu.fail(gpu.child("overlap_cost", false), "cluster.gpu.overlap_cost: a fraction, at most 1");
  gpu.finish();

  spec.intra_node = read_link(cluster, "intra_node", spec.gpus_per_node > 1, source_name);
  spec.inter_node = read_link(cluster, "inter_node", spec.nodes > 1, source_name);
  cluster.finish();
  return spec;
}

ClusterSpec ClusterSpec::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) TN_THROW(ConfigError, path, ": cannot read the cluster description");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

}  // namespace ternion
