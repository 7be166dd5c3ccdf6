// Data sets as the trainer sees them: examples by index, in named fields, gathered into batches
// of runtime::Tensor values keyed by name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/Type.h"
#include "runtime/Tensor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// Which part of a data set: the examples to train on or the held-out ones.
enum class Split { Train, Test };
llvm::StringRef splitName(Split split);

// One field of every example, e.g. an image f32[28, 28, 1] or a label i32[].
struct FieldInfo {
  std::string name;
  // Other names a model input may give this field (`x` for an image, `y` for a label).
  std::vector<std::string> aliases;
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> exampleShape;
  std::string file; // the file its values come from (npy:DIR), for messages; empty: none

  int64_t exampleElements() const;
  bool answersTo(llvm::StringRef fieldName) const;
};

// A field to put into a batch: which field (name or alias), under which key, and with which
// per-example shape. The shape may differ from the field's own when the element count is the
// same: an image f32[28, 28, 1] read as f32[784].
struct FieldRequest {
  std::string field;
  std::string key;                                  // empty: `field`
  std::optional<std::vector<int64_t>> exampleShape; // none: the field's own shape
};

// A model input as the data layer needs to know it: its name and type (leading dimension `B`).
struct InputSlot {
  std::string name;
  ir::TensorType type;
};

// Examples of a data set, addressed by index in [0, size()). Implementations keep their data in
// whatever form is compact and convert as they copy.
class Dataset {
public:
  virtual ~Dataset() = default;

  // What and which part, for messages: `fashion-mnist train`.
  virtual std::string description() const = 0;
  virtual int64_t size() const = 0;
  virtual const std::vector<FieldInfo> &fields() const = 0;
  // Writes example `index` of fields()[field] to `dst`: exampleElements() values of its dtype.
  // The caller has checked both indices.
  virtual void copyExample(size_t field, int64_t index, void *dst) const = 0;

  // The field with this name or alias.
  std::optional<size_t> findField(llvm::StringRef name) const;
  // One example of one field, shaped as the field's exampleShape.
  llvm::Expected<Tensor> example(llvm::StringRef field, int64_t index) const;
  // The requested fields of the examples `indices`, in that order: key -> [n, shape...].
  // No requests: every field under its own name and shape.
  llvm::Expected<std::map<std::string, Tensor>>
  gather(llvm::ArrayRef<int64_t> indices, llvm::ArrayRef<FieldRequest> requests = {}) const;
};

// A request whose field exists and whose shape fits, ready to gather.
struct ResolvedField {
  size_t field = 0;
  std::string key;
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> exampleShape;
};

// Checks requests against a data set: the field exists, the shape has the field's element count
// and keys are unique. No requests: every field under its own name and shape.
llvm::Expected<std::vector<ResolvedField>> resolveFields(const Dataset &dataset,
                                                         llvm::ArrayRef<FieldRequest> requests);
// Copies the resolved fields of examples `indices` into tensors [n, shape...] keyed by name.
std::map<std::string, Tensor> gatherFields(const Dataset &dataset,
                                           llvm::ArrayRef<ResolvedField> fields,
                                           llvm::ArrayRef<int64_t> indices);

// The requests that feed a model's inputs: each input takes the field with its name or alias,
// of the same dtype and per-example element count, shaped as the input's type without `B`.
llvm::Expected<std::vector<FieldRequest>> requestsForInputs(const Dataset &dataset,
                                                            llvm::ArrayRef<InputSlot> inputs);

// A data set held as one tensor [N, shape...] per field.
class TensorDataset : public Dataset {
public:
  explicit TensorDataset(std::string description) : description_(std::move(description)) {}

  // Adds a field; `values` is [N, shape...] with the N of the fields added before.
  llvm::Error addField(FieldInfo info, Tensor values);
  const Tensor &values(size_t field) const { return values_[field]; }

  std::string description() const override { return description_; }
  int64_t size() const override { return size_; }
  const std::vector<FieldInfo> &fields() const override { return fields_; }
  void copyExample(size_t field, int64_t index, void *dst) const override;

private:
  std::string description_;
  int64_t size_ = 0;
  std::vector<FieldInfo> fields_;
  std::vector<Tensor> values_;
};

} // namespace prism::runtime::data
