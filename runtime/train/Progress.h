// Training progress as a person expects it: on a terminal, one live line (epoch, step, loss,
// samples/s, ETA) rewritten in place; otherwise plain lines at a steady pace.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace prism::runtime::train {

class ProgressLine {
public:
  explicit ProgressLine(bool quiet);
  void step(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches, int64_t globalStep,
            int64_t totalSteps, double loss, double samplesPerSec, double etaSeconds);
  // A test-set evaluation: `label` says when ("epoch 2", "step 300").
  void evaluation(const std::string &label, double loss, std::optional<double> accuracy,
                  int64_t examples);
  // Ends a live line.
  void finish();

private:
  void clearLive();
  bool quiet_;
  bool terminal_;
  bool liveShown_ = false;
  std::chrono::steady_clock::time_point lastPrint_;
  int64_t lastStep_ = -1;
};

std::string formatDuration(double seconds);

} // namespace prism::runtime::train
