// Training progress output.
#include "runtime/train/Progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace prism::runtime::train {

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", s / 60, s % 60);
  return buf;
}

ProgressLine::ProgressLine(bool quiet) : quiet_(quiet), terminal_(isatty(STDOUT_FILENO) != 0) {}

void ProgressLine::clearLive() {
  if (liveShown_) {
    std::fputs("\r\033[K", stdout);
    liveShown_ = false;
  }
}

void ProgressLine::step(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches,
                        int64_t globalStep, int64_t totalSteps, double loss, double samplesPerSec,
                        double etaSeconds) {
  if (quiet_)
    return;
  auto now = std::chrono::steady_clock::now();
  double sinceLast = std::chrono::duration<double>(now - lastPrint_).count();
  bool last = globalStep == totalSteps;
  // A terminal redraws up to ten times a second; a log gets a line every ~5 s and the last one.
  if (!last && lastStep_ >= 0 && sinceLast < (terminal_ ? 0.1 : 5.0))
    return;
  lastPrint_ = now;
  lastStep_ = globalStep;
  char line[256];
  std::snprintf(
      line, sizeof(line), "epoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f samples/s  ETA %s",
      static_cast<long long>(epoch), static_cast<long long>(epochs), static_cast<long long>(batch),
      static_cast<long long>(batches), loss, samplesPerSec, formatDuration(etaSeconds).c_str());
  if (terminal_) {
    int width = 30;
    int filled = static_cast<int>(width * static_cast<double>(globalStep) /
                                  static_cast<double>(std::max<int64_t>(totalSteps, 1)));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(static_cast<size_t>(width), '.');
    std::printf("\r\033[K[%s] %s", bar.c_str(), line);
    liveShown_ = true;
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
}

void ProgressLine::evaluation(const std::string &label, double loss, std::optional<double> accuracy,
                              int64_t examples) {
  if (quiet_)
    return;
  clearLive();
  if (accuracy)
    std::printf("%s: test accuracy %.4f, test loss %.4f (%lld examples)\n", label.c_str(),
                *accuracy, loss, static_cast<long long>(examples));
  else
    std::printf("%s: test loss %.4f (%lld examples)\n", label.c_str(), loss,
                static_cast<long long>(examples));
  std::fflush(stdout);
  lastStep_ = -1;
}

void ProgressLine::finish() {
  if (quiet_ || !liveShown_)
    return;
  std::fputs("\n", stdout);
  liveShown_ = false;
  std::fflush(stdout);
}

} // namespace prism::runtime::train
