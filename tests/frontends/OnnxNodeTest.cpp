// Runs ONNX's backend node tests (Debian's libonnx-testdata) through the ONNX import and the CPU
// runtime: each model is imported forward-only, evaluated on its input_N.pb by the executor and
// by the float64 reference interpreter, and compared with its output_N.pb. Cases the import
// refuses on purpose are listed with the error they must give.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "frontends/onnx/OnnxGraph.h"
#include "frontends/onnx/OnnxImport.h"
#include "ir/Diagnostic.h"
#include "onnx/defs/schema.h"
#include "runtime/exec/Executor.h"
#include "runtime/reference/ReferenceInterpreter.h"
#include "llvm/Support/FileSystem.h"

namespace prism::frontends::onnx {
namespace {

const char *const kNodeTestDir = "/usr/share/libonnx-testdata/data/node";

// Node tests that import and must compute ONNX's outputs: those of the ops docs/import.md lists
// (one node each). test_training_dropout and test_training_dropout_default are left out: their
// masks come from the generator of ONNX's reference, and Prism draws its own.
const char *const kPassing[] = {"test_add",
                                "test_add_bcast",
                                "test_averagepool_2d_default",
                                "test_averagepool_2d_pads_count_include_pad",
                                "test_averagepool_2d_precomputed_pads",
                                "test_averagepool_2d_precomputed_same_upper",
                                "test_averagepool_2d_precomputed_strides",
                                "test_averagepool_2d_same_upper",
                                "test_averagepool_2d_strides",
                                "test_basic_conv_with_padding",
                                "test_basic_conv_without_padding",
                                "test_concat_1d_axis_0",
                                "test_concat_1d_axis_negative_1",
                                "test_concat_2d_axis_0",
                                "test_concat_2d_axis_1",
                                "test_concat_2d_axis_negative_1",
                                "test_concat_2d_axis_negative_2",
                                "test_concat_3d_axis_0",
                                "test_concat_3d_axis_1",
                                "test_concat_3d_axis_2",
                                "test_concat_3d_axis_negative_1",
                                "test_concat_3d_axis_negative_2",
                                "test_concat_3d_axis_negative_3",
                                "test_constant",
                                "test_constant_pad",
                                "test_conv_with_strides_and_asymmetric_padding",
                                "test_conv_with_strides_no_padding",
                                "test_conv_with_strides_padding",
                                "test_div",
                                "test_div_bcast",
                                "test_div_example",
                                "test_dropout_default",
                                "test_dropout_default_ratio",
                                "test_erf",
                                "test_exp",
                                "test_exp_example",
                                "test_flatten_axis0",
                                "test_flatten_axis1",
                                "test_flatten_axis2",
                                "test_flatten_axis3",
                                "test_flatten_default_axis",
                                "test_flatten_negative_axis1",
                                "test_flatten_negative_axis2",
                                "test_flatten_negative_axis3",
                                "test_flatten_negative_axis4",
                                "test_gather_0",
                                "test_gemm_all_attributes",
                                "test_gemm_alpha",
                                "test_gemm_beta",
                                "test_gemm_default_matrix_bias",
                                "test_gemm_default_no_bias",
                                "test_gemm_default_scalar_bias",
                                "test_gemm_default_single_elem_vector_bias",
                                "test_gemm_default_vector_bias",
                                "test_gemm_default_zero_bias",
                                "test_gemm_transposeA",
                                "test_gemm_transposeB",
                                "test_globalaveragepool",
                                "test_globalaveragepool_precomputed",
                                "test_identity",
                                "test_log",
                                "test_log_example",
                                "test_logsoftmax_axis_2",
                                "test_logsoftmax_default_axis",
                                "test_logsoftmax_example_1",
                                "test_logsoftmax_large_number",
                                "test_logsoftmax_negative_axis",
                                "test_matmul_2d",
                                "test_matmul_3d",
                                "test_matmul_4d",
                                "test_max_example",
                                "test_max_float32",
                                "test_max_float64",
                                "test_max_int32",
                                "test_max_int64",
                                "test_max_one_input",
                                "test_max_two_inputs",
                                "test_maxpool_2d_default",
                                "test_maxpool_2d_pads",
                                "test_maxpool_2d_precomputed_pads",
                                "test_maxpool_2d_precomputed_same_upper",
                                "test_maxpool_2d_precomputed_strides",
                                "test_maxpool_2d_same_upper",
                                "test_maxpool_2d_strides",
                                "test_min_example",
                                "test_min_float32",
                                "test_min_float64",
                                "test_min_int32",
                                "test_min_int64",
                                "test_min_one_input",
                                "test_min_two_inputs",
                                "test_mul",
                                "test_mul_bcast",
                                "test_mul_example",
                                "test_neg",
                                "test_neg_example",
                                "test_pow_bcast_scalar",
                                "test_reduce_mean_default_axes_keepdims_example",
                                "test_reduce_mean_default_axes_keepdims_random",
                                "test_reduce_mean_do_not_keepdims_example",
                                "test_reduce_mean_do_not_keepdims_random",
                                "test_reduce_mean_keepdims_example",
                                "test_reduce_mean_keepdims_random",
                                "test_reduce_mean_negative_axes_keepdims_example",
                                "test_reduce_mean_negative_axes_keepdims_random",
                                "test_reduce_sum_default_axes_keepdims_example",
                                "test_reduce_sum_default_axes_keepdims_random",
                                "test_reduce_sum_do_not_keepdims_example",
                                "test_reduce_sum_do_not_keepdims_random",
                                "test_reduce_sum_empty_axes_input_noop_example",
                                "test_reduce_sum_empty_axes_input_noop_random",
                                "test_reduce_sum_keepdims_example",
                                "test_reduce_sum_keepdims_random",
                                "test_reduce_sum_negative_axes_keepdims_example",
                                "test_reduce_sum_negative_axes_keepdims_random",
                                "test_relu",
                                "test_reshape_extended_dims",
                                "test_reshape_negative_dim",
                                "test_reshape_negative_extended_dims",
                                "test_reshape_one_dim",
                                "test_reshape_reduced_dims",
                                "test_reshape_reordered_all_dims",
                                "test_reshape_reordered_last_dims",
                                "test_reshape_zero_and_negative_dim",
                                "test_reshape_zero_dim",
                                "test_sigmoid",
                                "test_sigmoid_example",
                                "test_slice",
                                "test_slice_default_axes",
                                "test_slice_default_steps",
                                "test_slice_end_out_of_bounds",
                                "test_slice_neg",
                                "test_slice_negative_axes",
                                "test_softmax_axis_2",
                                "test_softmax_default_axis",
                                "test_softmax_example",
                                "test_softmax_large_number",
                                "test_softmax_negative_axis",
                                "test_sqrt",
                                "test_sqrt_example",
                                "test_squeeze",
                                "test_squeeze_negative_axes",
                                "test_sub",
                                "test_sub_bcast",
                                "test_sub_example",
                                "test_tanh",
                                "test_tanh_example",
                                "test_training_dropout_zero_ratio",
                                "test_transpose_all_permutations_0",
                                "test_transpose_all_permutations_1",
                                "test_transpose_all_permutations_2",
                                "test_transpose_all_permutations_3",
                                "test_transpose_all_permutations_4",
                                "test_transpose_all_permutations_5",
                                "test_transpose_default",
                                "test_unsqueeze_axis_0",
                                "test_unsqueeze_axis_1",
                                "test_unsqueeze_axis_2",
                                "test_unsqueeze_negative_axes",
                                "test_unsqueeze_three_axes",
                                "test_unsqueeze_two_axes",
                                "test_unsqueeze_unsorted_axes",
                                "test_where_example"};

// Node tests Prism refuses, grouped by a part of the error they must fail with: at import
// (naming the node by its op type and output, or the input), or at run time.
struct RefusedGroup {
  const char *error;
  std::vector<const char *> names;
};
const RefusedGroup kRefused[] = {
    {"input 'x' has the element type UINT8",
     {"test_add_uint8", "test_div_uint8", "test_maxpool_2d_uint8", "test_mul_uint8",
      "test_sub_uint8"}},
    {"the node (AveragePool) computing 'y': only 2-D windows over 4-D NCHW inputs are supported",
     {"test_averagepool_1d_default", "test_averagepool_3d_default"}},
    {"the node (AveragePool) computing 'y': ceil_mode = 1 changes the output size here",
     {"test_averagepool_2d_ceil"}},
    {"the node (AveragePool) computing 'y': pads [2, 2, 2, 2] are neither 'same' nor 'valid' and "
     "count_include_pad",
     {"test_averagepool_2d_pads"}},
    {"the node (AveragePool) computing 'y': count_include_pad = 1 with padding is not supported",
     {"test_averagepool_2d_precomputed_pads_count_include_pad"}},
    {"the node (AveragePool) computing 'y': auto_pad SAME_LOWER is not supported",
     {"test_averagepool_2d_same_lower"}},
    {"the node (BatchNormalization) computing 'y': BatchNormalization in inference mode (the "
     "running averages in",
     {"test_batchnorm_epsilon", "test_batchnorm_example"}},
    {"the node (BatchNormalization) computing 'y': only the output Y is supported (the running "
     "averages are Prism's",
     {"test_batchnorm_epsilon_training_mode", "test_batchnorm_example_training_mode"}},
    {"the node (Conv) computing 'y': auto_pad SAME_LOWER is not supported",
     {"test_conv_with_autopad_same"}},
    {"the node (Dropout) computing 'y': the mask output is not supported",
     {"test_dropout_default_mask", "test_dropout_default_mask_ratio",
      "test_training_dropout_default_mask", "test_training_dropout_mask",
      "test_training_dropout_zero_ratio_mask"}},
    {"opset 11 is not supported",
     {"test_dropout_default_old", "test_dropout_random_old", "test_unsqueeze_axis_3"}},
    {"the node (Pad) computing 'y': only mode 'constant' is supported",
     {"test_edge_pad", "test_reflect_pad"}},
    {"the node (Gather) computing 'y': only axis = 0 is supported",
     {"test_gather_1", "test_gather_2d_indices"}},
    {"'gather': index -9 (element 1 of the indices) is outside [0, 10) for a table of 10 rows",
     {"test_gather_negative_indices"}},
    {"input 'opt_in' is not a tensor", {"test_identity_opt"}},
    {"input 'x' is not a tensor", {"test_identity_sequence"}},
    {"the node (LayerNormalization) computing 'Y': only the last axis is supported",
     {"test_layer_normalization_2d_axis0", "test_layer_normalization_2d_axis_negative_2",
      "test_layer_normalization_3d_axis0_epsilon", "test_layer_normalization_3d_axis1_epsilon",
      "test_layer_normalization_3d_axis_negative_2_epsilon",
      "test_layer_normalization_3d_axis_negative_3_epsilon", "test_layer_normalization_4d_axis0",
      "test_layer_normalization_4d_axis1", "test_layer_normalization_4d_axis2",
      "test_layer_normalization_4d_axis_negative_2", "test_layer_normalization_4d_axis_negative_3",
      "test_layer_normalization_4d_axis_negative_4"}},
    {"the node (LayerNormalization) computing 'Y': the Mean and InvStdDev outputs are not "
     "supported",
     {"test_layer_normalization_2d_axis1", "test_layer_normalization_2d_axis_negative_1",
      "test_layer_normalization_3d_axis2_epsilon",
      "test_layer_normalization_3d_axis_negative_1_epsilon", "test_layer_normalization_4d_axis3",
      "test_layer_normalization_4d_axis_negative_1", "test_layer_normalization_default_axis"}},
    {"the node (LogSoftmax) computing 'y': only the last axis is supported",
     {"test_logsoftmax_axis_0", "test_logsoftmax_axis_1"}},
    {"input 'data_0' has the element type FLOAT16", {"test_max_float16", "test_min_float16"}},
    {"input 'data_0' has the element type INT16", {"test_max_int16", "test_min_int16"}},
    {"input 'data_0' has the element type INT8", {"test_max_int8", "test_min_int8"}},
    {"input 'data_0' has the element type UINT16", {"test_max_uint16", "test_min_uint16"}},
    {"input 'data_0' has the element type UINT32", {"test_max_uint32", "test_min_uint32"}},
    {"input 'data_0' has the element type UINT64", {"test_max_uint64", "test_min_uint64"}},
    {"input 'data_0' has the element type UINT8", {"test_max_uint8", "test_min_uint8"}},
    {"the node (MaxPool) computing 'y': only 2-D windows over 4-D NCHW inputs are supported",
     {"test_maxpool_1d_default", "test_maxpool_3d_default"}},
    {"the node (MaxPool) computing 'y': ceil_mode = 1 changes the output size here",
     {"test_maxpool_2d_ceil"}},
    {"the node (MaxPool) computing 'y': dilations other than 1 are not supported",
     {"test_maxpool_2d_dilations"}},
    {"the node (MaxPool) computing 'y': auto_pad SAME_LOWER is not supported",
     {"test_maxpool_2d_same_lower"}},
    {"the node (MaxPool) computing 'y': the Indices output is not supported",
     {"test_maxpool_with_argmax_2d_precomputed_pads",
      "test_maxpool_with_argmax_2d_precomputed_strides"}},
    {"the node (Pow) computing 'z': an exponent of 60 elements is not supported: only one, known "
     "at import (2, 0.5",
     {"test_pow"}},
    {"the node (Pow) computing 'z': an exponent of 3 elements is not supported: only one, known at "
     "import (2, 0.5",
     {"test_pow_bcast_array", "test_pow_example", "test_pow_types_float32_int32",
      "test_pow_types_float32_int64", "test_pow_types_int32_float32", "test_pow_types_int32_int32",
      "test_pow_types_int64_float32", "test_pow_types_int64_int64"}},
    {"opset 12 is not supported", {"test_pow_types_float", "test_pow_types_int"}},
    {"initializer: tensor 'y' has the element type UINT32", {"test_pow_types_float32_uint32"}},
    {"initializer: tensor 'y' has the element type UINT64", {"test_pow_types_float32_uint64"}},
    {"the node (ReduceL1) computing 'reduced': unsupported ONNX op 'ReduceL1'",
     {"test_reduce_l1_default_axes_keepdims_example", "test_reduce_l1_default_axes_keepdims_random",
      "test_reduce_l1_do_not_keepdims_example", "test_reduce_l1_do_not_keepdims_random",
      "test_reduce_l1_keep_dims_example", "test_reduce_l1_keep_dims_random",
      "test_reduce_l1_negative_axes_keep_dims_example",
      "test_reduce_l1_negative_axes_keep_dims_random"}},
    {"the node (ReduceL2) computing 'reduced': unsupported ONNX op 'ReduceL2'",
     {"test_reduce_l2_default_axes_keepdims_example", "test_reduce_l2_default_axes_keepdims_random",
      "test_reduce_l2_do_not_keepdims_example", "test_reduce_l2_do_not_keepdims_random",
      "test_reduce_l2_keep_dims_example", "test_reduce_l2_keep_dims_random",
      "test_reduce_l2_negative_axes_keep_dims_example",
      "test_reduce_l2_negative_axes_keep_dims_random"}},
    {"opset 6 is not supported", {"test_reduce_log_sum"}},
    {"the node (ReduceLogSum) computing 'reduced': unsupported ONNX op 'ReduceLogSum'",
     {"test_reduce_log_sum_asc_axes", "test_reduce_log_sum_default",
      "test_reduce_log_sum_desc_axes", "test_reduce_log_sum_negative_axes"}},
    {"the node (ReduceLogSumExp) computing 'reduced': unsupported ONNX op 'ReduceLogSumExp'",
     {"test_reduce_log_sum_exp_default_axes_keepdims_example",
      "test_reduce_log_sum_exp_default_axes_keepdims_random",
      "test_reduce_log_sum_exp_do_not_keepdims_example",
      "test_reduce_log_sum_exp_do_not_keepdims_random", "test_reduce_log_sum_exp_keepdims_example",
      "test_reduce_log_sum_exp_keepdims_random",
      "test_reduce_log_sum_exp_negative_axes_keepdims_example",
      "test_reduce_log_sum_exp_negative_axes_keepdims_random"}},
    {"the node (ReduceMax) computing 'reduced': unsupported ONNX op 'ReduceMax'",
     {"test_reduce_max_default_axes_keepdim_example",
      "test_reduce_max_default_axes_keepdims_random", "test_reduce_max_do_not_keepdims_example",
      "test_reduce_max_do_not_keepdims_random", "test_reduce_max_keepdims_example",
      "test_reduce_max_keepdims_random", "test_reduce_max_negative_axes_keepdims_example",
      "test_reduce_max_negative_axes_keepdims_random"}},
    {"the node (ReduceMin) computing 'reduced': unsupported ONNX op 'ReduceMin'",
     {"test_reduce_min_default_axes_keepdims_example",
      "test_reduce_min_default_axes_keepdims_random", "test_reduce_min_do_not_keepdims_example",
      "test_reduce_min_do_not_keepdims_random", "test_reduce_min_keepdims_example",
      "test_reduce_min_keepdims_random", "test_reduce_min_negative_axes_keepdims_example",
      "test_reduce_min_negative_axes_keepdims_random"}},
    {"the node (ReduceProd) computing 'reduced': unsupported ONNX op 'ReduceProd'",
     {"test_reduce_prod_default_axes_keepdims_example",
      "test_reduce_prod_default_axes_keepdims_random", "test_reduce_prod_do_not_keepdims_example",
      "test_reduce_prod_do_not_keepdims_random", "test_reduce_prod_keepdims_example",
      "test_reduce_prod_keepdims_random", "test_reduce_prod_negative_axes_keepdims_example",
      "test_reduce_prod_negative_axes_keepdims_random"}},
    {"the node (ReduceSumSquare) computing 'reduced': unsupported ONNX op 'ReduceSumSquare'",
     {"test_reduce_sum_square_default_axes_keepdims_example",
      "test_reduce_sum_square_default_axes_keepdims_random",
      "test_reduce_sum_square_do_not_keepdims_example",
      "test_reduce_sum_square_do_not_keepdims_random", "test_reduce_sum_square_keepdims_example",
      "test_reduce_sum_square_keepdims_random",
      "test_reduce_sum_square_negative_axes_keepdims_example",
      "test_reduce_sum_square_negative_axes_keepdims_random"}},
    {"the node (Reshape) computing 'reshaped': shape [3, 4, 0] or [0, 3, 4] is empty or too large",
     {"test_reshape_allowzero_reordered"}},
    {"the node (Slice) computing 'y': steps other than 1 are not supported",
     {"test_slice_neg_steps"}},
    {"the node (Slice) computing 'y': 'slice': slice [10, 10) is empty or outside [0, 10)",
     {"test_slice_start_out_of_bounds"}},
    {"the node (Softmax) computing 'y': only the last axis is supported",
     {"test_softmax_axis_0", "test_softmax_axis_1"}},
    {"the node (Where) computing 'z': 'where': a must be f32 or f64, got i64[2, 2]",
     {"test_where_long_example"}},
};

struct RefusedCase {
  const char *name;
  const char *error;
};

std::vector<RefusedCase> refusedCases() {
  std::vector<RefusedCase> cases;
  for (const RefusedGroup &group : kRefused)
    for (const char *name : group.names)
      cases.push_back({name, group.error});
  return cases;
}

// Inputs of a node that ONNX lets a graph compute but that Prism needs at import (shapes, axes,
// pads, exponents) or holds as parameters (filters, normalization statistics): a node test feeds
// them as graph inputs, and the test binds them as initializers, as an exported model has them.
const std::map<std::string, std::set<int>> kImportTimeInputs = {
    {"BatchNormalization", {1, 2, 3, 4}},
    {"Conv", {1, 2}},
    {"Dropout", {1, 2}},
    {"Gather", {0}},
    {"Pad", {1, 2}},
    {"Pow", {1}},
    {"ReduceSum", {1}},
    {"Reshape", {1}},
    {"Slice", {1, 2, 3, 4}},
    {"Squeeze", {1}},
    {"Unsqueeze", {1}},
};

// The first opset the import reads.
constexpr int64_t kImportedOpset = 13;

bool readFile(const std::string &path, std::string &bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream text;
  text << in.rdbuf();
  bytes = text.str();
  return true;
}

template <typename Proto>
::testing::AssertionResult readProto(const std::string &path, Proto &proto) {
  std::string bytes;
  if (!readFile(path, bytes) || !proto.ParseFromString(bytes))
    return ::testing::AssertionFailure() << "cannot read " << path;
  return ::testing::AssertionSuccess();
}

// A node test: the model, and its inputs and expected outputs by name.
struct NodeTest {
  ::onnx::ModelProto model;
  std::map<std::string, ::onnx::TensorProto> inputs;
  std::vector<::onnx::TensorProto> outputs;
};

::testing::AssertionResult loadNodeTest(const std::string &name, NodeTest &test) {
  const std::string dir = std::string(kNodeTestDir) + "/" + name;
  if (auto r = readProto(dir + "/model.onnx", test.model); !r)
    return r;
  const ::onnx::GraphProto &graph = test.model.graph();
  for (int i = 0; i < graph.input_size(); ++i) {
    ::onnx::TensorProto tensor;
    if (auto r = readProto(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb", tensor); !r)
      return r;
    test.inputs[graph.input(i).name()] = tensor;
  }
  for (int i = 0; i < graph.output_size(); ++i) {
    test.outputs.emplace_back();
    if (auto r = readProto(dir + "/test_data_set_0/output_" + std::to_string(i) + ".pb",
                           test.outputs.back());
        !r)
      return r;
  }
  return ::testing::AssertionSuccess();
}

// Turns the graph inputs that kImportTimeInputs names into initializers with their test values.
void bindImportTimeInputs(NodeTest &test) {
  std::set<std::string> bound;
  for (const ::onnx::NodeProto &node : test.model.graph().node()) {
    auto slots = kImportTimeInputs.find(node.op_type());
    if (slots == kImportTimeInputs.end())
      continue;
    for (int slot : slots->second)
      if (slot < node.input_size() && test.inputs.count(node.input(slot)))
        bound.insert(node.input(slot));
  }
  ::onnx::GraphProto *graph = test.model.mutable_graph();
  google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto> kept;
  for (const ::onnx::ValueInfoProto &input : graph->input()) {
    if (!bound.count(input.name())) {
      *kept.Add() = input;
      continue;
    }
    ::onnx::TensorProto *init = graph->add_initializer();
    *init = test.inputs.at(input.name());
    init->set_name(input.name());
    test.inputs.erase(input.name());
  }
  graph->mutable_input()->Swap(&kept);
}

// Node tests written for an opset before 13 are read at opset 13 when every op of the graph
// means the same there (ONNX's schemas give the version each definition dates from), as ONNX's
// version converter would.
void raiseOpset(::onnx::ModelProto &model) {
  for (::onnx::OperatorSetIdProto &opset : *model.mutable_opset_import()) {
    if (!(opset.domain().empty() || opset.domain() == "ai.onnx") ||
        opset.version() >= kImportedOpset)
      continue;
    for (const ::onnx::NodeProto &node : model.graph().node()) {
      const auto *before = ::onnx::OpSchemaRegistry::Schema(node.op_type(), opset.version());
      const auto *after = ::onnx::OpSchemaRegistry::Schema(node.op_type(), kImportedOpset);
      if (!before || !after || before->SinceVersion() != after->SinceVersion())
        return;
    }
    opset.set_version(kImportedOpset);
  }
}

// A TensorProto as a runtime tensor of `dtype` (the Prism input's).
runtime::Tensor toRuntimeTensor(const ConstTensor &t, ir::DType dtype) {
  runtime::Tensor out(dtype, t.dims);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.integer ? static_cast<double>(t.ints[i]) : t.floats[i];
    switch (dtype) {
    case ir::DType::F32:
      out.data<float>()[i] = static_cast<float>(v);
      break;
    case ir::DType::F64:
      out.data<double>()[i] = v;
      break;
    case ir::DType::I32:
      out.data<int32_t>()[i] = static_cast<int32_t>(t.ints[i]);
      break;
    case ir::DType::I64:
      out.data<int64_t>()[i] = t.ints[i];
      break;
    case ir::DType::Bool:
      out.data<uint8_t>()[i] = v != 0;
      break;
    }
  }
  return out;
}

std::vector<double> toDoubles(const ConstTensor &t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.push_back(t.integer ? static_cast<double>(t.ints[i]) : t.floats[i]);
  return out;
}

std::vector<double> toDoubles(const runtime::Tensor &t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.dtype()) {
    case ir::DType::F32:
      out.push_back(t.data<float>()[i]);
      break;
    case ir::DType::F64:
      out.push_back(t.data<double>()[i]);
      break;
    case ir::DType::I32:
      out.push_back(t.data<int32_t>()[i]);
      break;
    case ir::DType::I64:
      out.push_back(static_cast<double>(t.data<int64_t>()[i]));
      break;
    case ir::DType::Bool:
      out.push_back(t.data<uint8_t>()[i]);
      break;
    }
  }
  return out;
}

// Elementwise within 1e-5 absolute + 1e-4 relative; the first difference, if any.
void expectClose(const std::vector<int64_t> &wantDims, const std::vector<double> &want,
                 const std::vector<int64_t> &gotDims, const std::vector<double> &got,
                 const std::string &what) {
  ASSERT_EQ(wantDims, gotDims) << what << ": shape";
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(want[i] - got[i]), 1e-5 + 1e-4 * std::abs(want[i]))
        << what << ": element " << i << " is " << got[i] << ", ONNX gives " << want[i];
}

// A node test imported, its values file written and its inputs made feeds.
struct ImportedNodeTest {
  NodeTest test;
  llvm::SmallString<128> valuesPath;
  ImportedModel imported;
  runtime::Feeds feeds;
  runtime::reference::Feeds referenceFeeds;

  ImportedNodeTest() = default;
  ImportedNodeTest(const ImportedNodeTest &) = delete;
  ~ImportedNodeTest() {
    if (!valuesPath.empty())
      llvm::sys::fs::remove(valuesPath);
  }
};

llvm::Error makeFeeds(ImportedNodeTest &t) {
  for (const auto &[onnxName, proto] : t.test.inputs) {
    const std::string name = OnnxGraph::sanitize(onnxName);
    const ir::Value *input = t.imported.module->lookup(name);
    if (!input)
      return ir::makeError("no input for " + onnxName);
    auto tensor = readTensor(proto);
    if (!tensor)
      return tensor.takeError();
    t.feeds[name] = toRuntimeTensor(*tensor, input->type().dtype);
    t.referenceFeeds[name] =
        runtime::reference::Tensor(input->type().dtype, tensor->dims, toDoubles(*tensor));
  }
  return llvm::Error::success();
}

// Reads node test `name` and imports it forward-only, as Prism reads it.
llvm::Error importNodeTest(const std::string &name, ImportedNodeTest &t) {
  if (auto loaded = loadNodeTest(name, t.test); !loaded)
    return ir::makeError(loaded.message());
  bindImportTimeInputs(t.test);
  raiseOpset(t.test.model);
  std::string bytes;
  t.test.model.SerializeToString(&bytes);
  if (std::error_code e = llvm::sys::fs::createTemporaryFile("onnx-node", "weights", t.valuesPath))
    return ir::makeError("cannot create a values file: " + e.message());
  ImportOptions options;
  options.forwardOnly = true;
  options.valuesFile = t.valuesPath.str().str();
  auto imported = importOnnx(bytes, name + ".onnx", options);
  if (!imported)
    return imported.takeError();
  t.imported = std::move(*imported);
  std::ofstream(t.valuesPath.str().str(), std::ios::binary) << t.imported.values;
  return makeFeeds(t);
}

// Training mode: a batch normalization uses the batch's statistics, as ONNX's training mode.
runtime::StepContext stepContext() {
  runtime::StepContext context;
  context.mode = runtime::StepMode::Training;
  return context;
}

// One step of the CPU executor over the test's inputs, keeping the graph's outputs.
llvm::Expected<std::unique_ptr<runtime::Executor>>
runOnCpu(ImportedNodeTest &t, std::shared_ptr<runtime::VariableStore> store) {
  const ir::Module &module = *t.imported.module;
  if (auto e = store->initialize(module, 0))
    return std::move(e);
  runtime::ExecutorOptions options;
  options.outputs = t.imported.outputs;
  options.mode = stepContext().mode;
  auto exec = runtime::Executor::create(module, store, options);
  if (!exec)
    return exec.takeError();
  if (auto e = (*exec)->step(t.feeds))
    return std::move(e);
  return std::move(*exec);
}

bool haveNodeTests() {
  return llvm::sys::fs::is_directory(kNodeTestDir);
}

class OnnxNodeTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    if (!haveNodeTests())
      GTEST_SKIP() << kNodeTestDir << " is absent (Debian's libonnx-testdata)";
  }
};

class OnnxNodeRefusedTest : public ::testing::TestWithParam<RefusedCase> {
protected:
  void SetUp() override {
    if (!haveNodeTests())
      GTEST_SKIP() << kNodeTestDir << " is absent (Debian's libonnx-testdata)";
  }
};

TEST_P(OnnxNodeTest, MatchesOnnxOutputs) {
  ImportedNodeTest t;
  if (auto e = importNodeTest(GetParam(), t))
    FAIL() << llvm::toString(std::move(e));
  const ir::Module &module = *t.imported.module;
  auto store = std::make_shared<runtime::VariableStore>();
  auto exec = runOnCpu(t, store);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  runtime::reference::ReferenceInterpreter reference(module, stepContext());
  ASSERT_FALSE(bool(reference.initializeVariables(0)));
  auto referenceStep = reference.step(t.referenceFeeds);
  ASSERT_TRUE(bool(referenceStep)) << llvm::toString(referenceStep.takeError());

  for (size_t i = 0; i < t.imported.outputs.size(); ++i) {
    const std::string &value = t.imported.outputs[i];
    auto want = readTensor(t.test.outputs[i]);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    // An output the import made the graph's input (Identity) or a variable (Constant) is no
    // op's result: the executor keeps op results only.
    const ir::Value *held = module.lookup(value);
    ASSERT_NE(held, nullptr) << value;
    const runtime::Tensor *got = nullptr;
    if (held->kind() == ir::ValueKind::Input) {
      got = &t.feeds.at(value);
    } else if (held->kind() == ir::ValueKind::Variable) {
      got = store->find(value);
    } else if (const runtime::RuntimeValue *result = (*exec)->output(value)) {
      ASSERT_FALSE(result->sparse) << value;
      got = &result->dense;
    }
    ASSERT_NE(got, nullptr) << value;
    expectClose(want->dims, toDoubles(*want), got->shape(), toDoubles(*got),
                "output " + value + " (CPU)");
    const runtime::reference::Tensor *referenceGot = reference.value(value);
    ASSERT_NE(referenceGot, nullptr) << value;
    expectClose(want->dims, toDoubles(*want),
                std::vector<int64_t>(referenceGot->shape().begin(), referenceGot->shape().end()),
                referenceGot->toDense().data(), "output " + value + " (reference)");
  }
}

TEST_P(OnnxNodeRefusedTest, FailsWithAClearError) {
  const RefusedCase &refused = GetParam();
  ImportedNodeTest t;
  llvm::Error error = importNodeTest(refused.name, t);
  if (!error) {
    auto exec = runOnCpu(t, std::make_shared<runtime::VariableStore>());
    error = exec ? llvm::Error::success() : exec.takeError();
  }
  ASSERT_TRUE(bool(error)) << refused.name << " imports and runs";
  const std::string message = ir::messageOf(std::move(error));
  EXPECT_NE(message.find(refused.error), std::string::npos) << message;
}

std::string caseName(const ::testing::TestParamInfo<const char *> &info) {
  return info.param;
}
std::string refusedName(const ::testing::TestParamInfo<RefusedCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Node, OnnxNodeTest, ::testing::ValuesIn(kPassing), caseName);
INSTANTIATE_TEST_SUITE_P(Node, OnnxNodeRefusedTest, ::testing::ValuesIn(refusedCases()),
                         refusedName);

} // namespace
} // namespace prism::frontends::onnx
