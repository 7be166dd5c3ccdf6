// Where an op runs inside its task: a device named `cpu:N` or `cuda:N`. Written by
// replicate-in-graph as the `device` attribute of a tower's ops, read by the executor (which
// binds each tower to its device) and by the plan (each task's devices).
#pragma once

#include <optional>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

class Op;

enum class DeviceKind : uint8_t { Cpu, Cuda };

struct DeviceId {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  // `cpu:0`, `cuda:1`.
  std::string str() const;
  // Reads `cpu:N`, `cuda:N` and `gpu:N` (the cluster files' spelling of cuda); the error names
  // the text and what was expected.
  static llvm::Expected<DeviceId> parse(llvm::StringRef text);
  bool operator==(const DeviceId &o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const DeviceId &o) const { return !(*this == o); }
};

llvm::StringRef deviceKindName(DeviceKind kind); // "cpu", "cuda"

// The device an op is pinned to (its `device` attribute), or none for the task's shared ops.
std::optional<DeviceId> opDevice(const Op &op);
void setOpDevice(Op &op, DeviceId device);

} // namespace prism::ir
