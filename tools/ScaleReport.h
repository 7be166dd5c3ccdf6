// What `prism simulate MODEL --scale ...` prints and plots: the table, its JSON and an SVG of
// samples/s and scaling efficiency per strategy drawn by gnuplot.
#pragma once

#include <string>
#include <vector>

#include "plan/ScaleStudy.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::tools {

// What the points were simulated for, for the headings and the plot's title.
struct ScaleSetting {
  std::string model;   // the model file's stem
  std::string profile; // the profile's source (a path or "built-in")
  std::string gpu;     // the GPU class's name
  const plan::ScaleOptions *options = nullptr;
};

void printScaleTable(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting,
                     llvm::raw_ostream &os);
std::string scaleToJson(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting);
// Two panels: samples/s against workers (log-log) and scaling efficiency, a line per strategy.
// Runs gnuplot; an error names it when it is not installed.
llvm::Error writeScalePlot(const std::vector<plan::ScalePoint> &points, const ScaleSetting &setting,
                           const std::string &path);

} // namespace prism::tools
