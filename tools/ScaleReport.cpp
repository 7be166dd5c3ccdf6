// The scale table, its JSON and its SVG plot (see ScaleReport.h).
#include "tools/ScaleReport.h"

#include <nlohmann/json.hpp>

#include "cluster/Cluster.h"
#include "ir/Diagnostic.h"
#include "tools/OutputFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

namespace prism::tools {
namespace {

// gnuplot's single-quoted strings take a quote as two.
std::string gnuplotString(llvm::StringRef text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string heading(const ScaleSetting &s) {
  const plan::ScaleOptions &o = *s.options;
  return s.model + ", " + std::to_string(o.gpusPerHost) + " GPUs per host (" + s.gpu + "), " +
         cluster::formatBandwidth(o.linkBitsPerSec) + " links, " +
         std::to_string(o.batchPerWorker) + " samples per worker";
}

// The gnuplot script: the points as one data block per strategy, then the two panels.
std::string plotScript(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting,
                       const std::string &output) {
  std::string script;
  llvm::raw_string_ostream os(script);
  const auto &strategies = setting.options->strategies;
  for (size_t i = 0; i < strategies.size(); ++i) {
    os << "$s" << i << " << EOD\n";
    for (const plan::ScalePoint &p : points)
      if (p.strategy == strategies[i])
        os << p.workers << " " << llvm::format("%.6g %.6g", p.samplesPerSecond, p.efficiency)
           << "\n";
    os << "EOD\n";
  }
  // A dashed line at 1 across the counts: linear scaling.
  os << "$linear << EOD\n"
     << points.front().workers << " 1\n"
     << points.back().workers << " 1\nEOD\n";
  // noenhanced: names such as lstm_lm are text, not subscripts.
  os << "set terminal svg size 1100,440 dynamic noenhanced font 'sans,12' background '#ffffff'\n"
     << "set output " << gnuplotString(output) << "\n"
     << "set multiplot layout 1,2 title " << gnuplotString(heading(setting)) << "\n"
     << "set grid\nset key top left\nset logscale x 2\nset xlabel 'workers (GPUs)'\n"
     << "set logscale y 10\nset ylabel 'samples/s'\nset title 'throughput (log-log)'\n";
  auto plotLines = [&](int column, const char *extra) {
    os << "plot ";
    for (size_t i = 0; i < strategies.size(); ++i)
      os << (i ? ", " : "") << "$s" << i << " using 1:" << column
         << " with linespoints lw 2 pt 7 ps 0.6 title "
         << gnuplotString(passes::strategyName(strategies[i]));
    os << extra << "\n";
  };
  plotLines(2, "");
  os << "unset logscale y\nset yrange [0:1.05]\nset key top right\n"
     << "set ylabel 'samples/s / (workers x samples/s of one worker)'\n"
     << "set title 'scaling efficiency'\n";
  plotLines(3, ", $linear using 1:2 with lines dt 2 lc 'gray' title 'linear'");
  os << "unset multiplot\n";
  return script;
}

} // namespace

void printScaleTable(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting,
                     llvm::raw_ostream &os) {
  os << "scale on paper (profile: " << setting.profile << "): " << heading(setting) << "\n"
     << "  workers  hosts  strategy       step ms      samples/s  efficiency\n";
  for (const plan::ScalePoint &p : points)
    os << llvm::format("  %7d %6d  %-9s %12.3f %14.1f %11.3f\n", p.workers, p.hosts,
                       passes::strategyName(p.strategy).str().c_str(), p.stepSeconds * 1e3,
                       p.samplesPerSecond, p.efficiency);
}

std::string scaleToJson(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting) {
  const plan::ScaleOptions &o = *setting.options;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const plan::ScalePoint &p : points)
    rows.push_back({{"workers", p.workers},
                    {"hosts", p.hosts},
                    {"strategy", passes::strategyName(p.strategy).str()},
                    {"global_batch", p.globalBatch},
                    {"step_seconds", p.stepSeconds},
                    {"samples_per_second", p.samplesPerSecond},
                    {"efficiency", p.efficiency}});
  nlohmann::ordered_json root = {{"model", setting.model},
                                 {"profile", setting.profile},
                                 {"gpu", setting.gpu},
                                 {"gpus_per_host", o.gpusPerHost},
                                 {"link_bits_per_sec", o.linkBitsPerSec},
                                 {"ps_per_host", o.psPerHost},
                                 {"batch_per_worker", o.batchPerWorker},
                                 {"points", rows}};
  return root.dump(2) + "\n";
}

llvm::Error writeScalePlot(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting,
                           const std::string &path) {
  auto gnuplot = llvm::sys::findProgramByName("gnuplot");
  if (!gnuplot)
    return ir::makeError("option --plot: gnuplot is not installed (Debian: apt-get install "
                         "gnuplot-nox)");
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("prism-scale-plot", dir))
    return ir::makeError("cannot make a scratch directory: " + ec.message());
  llvm::SmallString<128> script(dir), svg(dir), log(dir);
  llvm::sys::path::append(script, "plot.gp");
  llvm::sys::path::append(svg, "plot.svg");
  llvm::sys::path::append(log, "gnuplot.log");
  if (auto e = writeOutput(script, plotScript(points, setting, std::string(svg)))) {
    llvm::sys::fs::remove_directories(dir);
    return e;
  }
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(log),
                                                 llvm::StringRef(log)};
  std::string message;
  // A bound on the wait: a gnuplot that hangs must not hang the command.
  const int status = llvm::sys::ExecuteAndWait(*gnuplot, {*gnuplot, script}, llvm::None, redirects,
                                               /*SecondsToWait=*/60, 0, &message);
  auto svgText = llvm::MemoryBuffer::getFile(svg);
  if (status != 0 || !svgText) {
    auto logText = llvm::MemoryBuffer::getFile(log);
    std::string why = message.empty() ? "status " + std::to_string(status) : message;
    if (logText)
      why += ": " + (*logText)->getBuffer().trim().str();
    llvm::sys::fs::remove_directories(dir);
    return ir::makeError("option --plot: " + *gnuplot + " failed (" + why + ")");
  }
  llvm::Error written = writeOutput(path, (*svgText)->getBuffer());
  llvm::sys::fs::remove_directories(dir);
  return written;
}

} // namespace prism::tools
