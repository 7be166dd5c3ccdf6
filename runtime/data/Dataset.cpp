// Fields, gathering examples into batches, binding model inputs to fields, in-memory data sets.
#include "runtime/data/Dataset.h"

#include <cstring>
#include <set>

#include "ir/Diagnostic.h"
#include "llvm/ADT/StringExtras.h"

namespace prism::runtime::data {

llvm::StringRef splitName(Split split) {
  return split == Split::Train ? "train" : "test";
}

namespace {

int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The data set's field names, with their aliases in parentheses when `aliases`.
std::string fieldList(const Dataset &dataset, bool aliases) {
  std::string text;
  for (const FieldInfo &field : dataset.fields()) {
    text += (text.empty() ? "" : ", ") + field.name;
    if (aliases && !field.aliases.empty())
      text += " (" + llvm::join(field.aliases, ", ") + ")";
  }
  return text;
}

// "field 'x'", naming the file its values come from when there is one.
std::string fieldText(const std::string &name, const FieldInfo &info) {
  return "field '" + name + "'" + (info.file.empty() ? "" : " (" + info.file + ")");
}

} // namespace

int64_t FieldInfo::exampleElements() const {
  return product(exampleShape);
}

bool FieldInfo::answersTo(llvm::StringRef fieldName) const {
  if (name == fieldName)
    return true;
  for (const std::string &alias : aliases)
    if (alias == fieldName)
      return true;
  return false;
}

std::optional<size_t> Dataset::findField(llvm::StringRef name) const {
  const std::vector<FieldInfo> &all = fields();
  // Names win over aliases, so a field called `x` is never shadowed by another's alias.
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == name)
      return i;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].answersTo(name))
      return i;
  return std::nullopt;
}

llvm::Expected<Tensor> Dataset::example(llvm::StringRef field, int64_t index) const {
  std::optional<size_t> found = findField(field);
  if (!found)
    return ir::makeError(description() + " has no field '" + field + "'");
  if (index < 0 || index >= size())
    return ir::makeError(description() + ": example " + llvm::Twine(index) +
                         " is out of range [0, " + llvm::Twine(size()) + ")");
  const FieldInfo &info = fields()[*found];
  Tensor t(info.dtype, info.exampleShape);
  copyExample(*found, index, t.raw());
  return std::move(t);
}

llvm::Expected<std::map<std::string, Tensor>>
Dataset::gather(llvm::ArrayRef<int64_t> indices, llvm::ArrayRef<FieldRequest> requests) const {
  auto resolved = resolveFields(*this, requests);
  if (!resolved)
    return resolved.takeError();
  for (int64_t index : indices)
    if (index < 0 || index >= size())
      return ir::makeError(description() + ": example " + llvm::Twine(index) +
                           " is out of range [0, " + llvm::Twine(size()) + ")");
  return gatherFields(*this, *resolved, indices);
}

llvm::Expected<std::vector<ResolvedField>> resolveFields(const Dataset &dataset,
                                                         llvm::ArrayRef<FieldRequest> requests) {
  std::vector<ResolvedField> resolved;
  if (requests.empty()) {
    for (size_t i = 0; i < dataset.fields().size(); ++i) {
      const FieldInfo &info = dataset.fields()[i];
      resolved.push_back({i, info.name, info.dtype, info.exampleShape});
    }
    return std::move(resolved);
  }
  std::set<std::string> keys;
  for (const FieldRequest &request : requests) {
    std::optional<size_t> found = dataset.findField(request.field);
    if (!found)
      return ir::makeError(dataset.description() + " has no field '" + request.field +
                           "' (it has " + fieldList(dataset, /*aliases=*/false) + ")");
    const FieldInfo &info = dataset.fields()[*found];
    std::vector<int64_t> shape = request.exampleShape.value_or(info.exampleShape);
    for (int64_t d : shape)
      if (d < 0)
        return ir::makeError("field '" + request.field + "' cannot take the shape " +
                             shapeString(shape) + ": dimensions must be static");
    if (product(shape) != info.exampleElements())
      return ir::makeError(fieldText(request.field, info) + " of " + dataset.description() +
                           " has shape " + shapeString(info.exampleShape) +
                           " per example, which cannot be read as " + shapeString(shape));
    std::string key = request.key.empty() ? request.field : request.key;
    if (!keys.insert(key).second)
      return ir::makeError("batch key '" + key + "' is requested twice");
    resolved.push_back({*found, key, info.dtype, shape});
  }
  return std::move(resolved);
}

std::map<std::string, Tensor> gatherFields(const Dataset &dataset,
                                           llvm::ArrayRef<ResolvedField> fields,
                                           llvm::ArrayRef<int64_t> indices) {
  std::map<std::string, Tensor> batch;
  for (const ResolvedField &field : fields) {
    std::vector<int64_t> shape{static_cast<int64_t>(indices.size())};
    shape.insert(shape.end(), field.exampleShape.begin(), field.exampleShape.end());
    Tensor t(field.dtype, shape);
    int64_t stride = product(field.exampleShape) * ir::dtypeBytes(field.dtype);
    auto *dst = static_cast<uint8_t *>(t.raw());
    for (size_t row = 0; row < indices.size(); ++row)
      dataset.copyExample(field.field, indices[row], dst + row * stride);
    batch.emplace(field.key, std::move(t));
  }
  return batch;
}

llvm::Expected<std::vector<FieldRequest>> requestsForInputs(const Dataset &dataset,
                                                            llvm::ArrayRef<InputSlot> inputs) {
  std::vector<FieldRequest> requests;
  for (const InputSlot &input : inputs) {
    const ir::TensorType &type = input.type;
    if (type.sparse || type.dims.empty() || type.dims[0] != ir::kBatchDim)
      return ir::makeError("input '" + input.name + "' (" + type.str() +
                           ") cannot be fed from data: it needs the batch dimension B first");
    std::optional<size_t> found = dataset.findField(input.name);
    if (!found)
      return ir::makeError(
          "input '" + input.name + "': " + dataset.description() +
          " has no field of that name; its fields are " + fieldList(dataset, /*aliases=*/true) +
          ". The model is written for other data: pass it with --data "
          "(docs/data.md), or name it in the model (data \"zipf:1000,tokens=20\")");
    const FieldInfo &info = dataset.fields()[*found];
    if (info.dtype != type.dtype)
      return ir::makeError("input '" + input.name + "' (" + type.str() + ") cannot be fed from " +
                           fieldText(info.name, info) + " of " + dataset.description() +
                           ", which is " + ir::dtypeName(info.dtype) +
                           shapeString(info.exampleShape) + " per example");
    std::vector<int64_t> shape(type.dims.begin() + 1, type.dims.end());
    requests.push_back({input.name, input.name, shape});
  }
  // The shape checks are resolveFields's.
  if (auto resolved = resolveFields(dataset, requests); !resolved)
    return resolved.takeError();
  return std::move(requests);
}

llvm::Error TensorDataset::addField(FieldInfo info, Tensor values) {
  if (values.empty() || values.rank() == 0)
    return ir::makeError(description_ + ": field '" + info.name + "' needs values [N, ...]");
  std::vector<int64_t> exampleShape(values.shape().begin() + 1, values.shape().end());
  if (values.dtype() != info.dtype || exampleShape != info.exampleShape)
    return ir::makeError(description_ + ": field '" + info.name + "' is declared " +
                         ir::dtypeName(info.dtype) + shapeString(info.exampleShape) +
                         " per example, its values are " + ir::dtypeName(values.dtype()) +
                         shapeString(values.shape()));
  if (!fields_.empty() && values.dim(0) != size_)
    return ir::makeError(description_ + ": field '" + info.name + "' has " +
                         llvm::Twine(values.dim(0)) + " examples, the others " +
                         llvm::Twine(size_));
  size_ = values.dim(0);
  fields_.push_back(std::move(info));
  values_.push_back(std::move(values));
  return llvm::Error::success();
}

void TensorDataset::copyExample(size_t field, int64_t index, void *dst) const {
  int64_t bytes = fields_[field].exampleElements() * ir::dtypeBytes(fields_[field].dtype);
  if (bytes)
    std::memcpy(dst, static_cast<const uint8_t *>(values_[field].raw()) + index * bytes,
                static_cast<size_t>(bytes));
}

} // namespace prism::runtime::data
