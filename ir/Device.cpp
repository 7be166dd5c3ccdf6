// Device names of ops.
#include "ir/Device.h"

#include "ir/Diagnostic.h"
#include "ir/Module.h"
#include "ir/OpTable.h"

namespace prism::ir {

llvm::StringRef deviceKindName(DeviceKind kind) {
  return kind == DeviceKind::Cuda ? "cuda" : "cpu";
}

std::string DeviceId::str() const {
  return deviceKindName(kind).str() + ":" + std::to_string(index);
}

llvm::Expected<DeviceId> DeviceId::parse(llvm::StringRef text) {
  DeviceId id;
  llvm::StringRef rest = text;
  if (rest.consume_front("cpu:"))
    id.kind = DeviceKind::Cpu;
  else if (rest.consume_front("cuda:") || rest.consume_front("gpu:"))
    id.kind = DeviceKind::Cuda;
  else
    return makeError("device '" + text + "': expected cpu:N, cuda:N or gpu:N");
  unsigned index = 0;
  if (rest.getAsInteger(10, index) || index > 1u << 20)
    return makeError("device '" + text + "': expected a device number after ':'");
  id.index = static_cast<int>(index);
  return id;
}

std::optional<DeviceId> opDevice(const Op &op) {
  const Attr *device = op.attrs.find(kDeviceAttr);
  if (!device || device->kind() != AttrKind::String)
    return std::nullopt;
  auto id = DeviceId::parse(device->getString());
  if (!id) {
    consumeError(id.takeError()); // the verifier reports malformed device attributes
    return std::nullopt;
  }
  return *id;
}

void setOpDevice(Op &op, DeviceId device) {
  op.attrs.set(kDeviceAttr, Attr::string(device.str()));
}

} // namespace prism::ir
