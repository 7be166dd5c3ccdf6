// Two real parameter servers on 127.0.0.1 (ports picked by the system) holding a table `emb`
// f32[10, 3] split into rows [0, 4) and [4, 10), a dense `w` f32[4, 2] on the first and a
// `bias` f32[6] split [0, 3) and [3, 6), applying steps with SGD; plus the float64 oracle.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/ps/ParameterServer.h"
#include "runtime/ps/PsClient.h"

namespace prism::runtime::ps::testing {

inline constexpr char kToken[] = "test-job-token";
inline constexpr double kLearningRate = 0.5;

struct VariableSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> rowSplits; // per server: {rowBegin, rowEnd}, or empty
};

inline std::vector<VariableSpec> testVariables() {
  return {{"emb", {10, 3}, {{0, 4}, {4, 10}}},
          {"w", {4, 2}, {{0, 4}, {}}},
          {"bias", {6}, {{0, 3}, {3, 6}}}};
}

inline int64_t rowElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

// The initial value of element `i` of a variable.
inline double initialValue(const std::string &name, int64_t i) {
  return 0.25 * std::sin(0.7 * static_cast<double>(i) + static_cast<double>(name.size()));
}

// SGD on a store: v -= lr * g, dense or row by row (repeated rows add up).
inline llvm::Error applySgd(runtime::VariableStore &store, const GradientSet &gradients) {
  for (const auto &[name, gradient] : gradients) {
    Tensor *value = store.find(name);
    float *v = value->data<float>();
    if (!gradient.isSparse()) {
      for (int64_t i = 0; i < value->numElements(); ++i)
        v[i] -= static_cast<float>(kLearningRate) * gradient.dense.data<float>()[i];
      continue;
    }
    int64_t width = rowElements(value->shape());
    for (int64_t r = 0; r < gradient.indices.numElements(); ++r)
      for (int64_t k = 0; k < width; ++k)
        v[gradient.indices.data<int64_t>()[r] * width + k] -=
            static_cast<float>(kLearningRate) * gradient.rows.data<float>()[r * width + k];
  }
  return llvm::Error::success();
}

class TestCluster {
public:
  // `apply` defaults to SGD on the server's store; `failAtStep` >= 0 makes that step fail.
  // `tls`: each server's identity (TLS), or none (plaintext). `policy`: how pushes become steps.
  explicit TestCluster(int64_t contributors,
                       std::chrono::milliseconds waitTimeout = std::chrono::milliseconds(20000),
                       int64_t failAtStep = -1,
                       std::vector<std::optional<dist::TlsIdentity>> tls = {},
                       PushPolicy policy = {}) {
    for (size_t server = 0; server < 2; ++server) {
      auto store = std::make_shared<runtime::VariableStore>();
      ParameterServerOptions options;
      options.jobToken = kToken;
      if (server < tls.size())
        options.tls = tls[server];
      options.contributors = contributors;
      options.policy = policy;
      options.variables = store;
      options.waitTimeout = waitTimeout;
      options.apply = [store, failAtStep](int64_t step, const GradientSet &gradients) {
        if (step == failAtStep)
          return ir::makeError("optimizer diverged at step " + llvm::Twine(step));
        return applySgd(*store, gradients);
      };
      options.shards = shardsOf(server);
      for (const PsShard &shard : options.shards)
        store->set(shard.name, initialShard(shard));
      auto started = ParameterServer::start(std::move(options));
      if (!started) {
        ADD_FAILURE() << llvm::toString(started.takeError());
        return;
      }
      stores.push_back(store);
      servers.push_back(std::move(*started));
    }
  }

  static std::vector<PsShard> shardsOf(size_t server) {
    std::vector<PsShard> shards;
    for (const VariableSpec &spec : testVariables()) {
      if (spec.rowSplits[server].empty())
        continue;
      shards.push_back(PsShard{spec.name, ir::DType::F32, spec.rowSplits[server][0],
                               spec.rowSplits[server][1], spec.shape});
    }
    return shards;
  }

  static Tensor initialShard(const PsShard &shard) {
    Tensor value(shard.dtype, shard.shape());
    int64_t offset = shard.rowBegin * shard.rowElements();
    for (int64_t i = 0; i < value.numElements(); ++i)
      value.data<float>()[i] = static_cast<float>(initialValue(shard.name, offset + i));
    return value;
  }

  PsClientOptions clientOptions(std::string token = kToken) const {
    PsClientOptions options;
    options.jobToken = std::move(token);
    options.rpcDeadline = std::chrono::milliseconds(30000);
    for (const VariableSpec &spec : testVariables()) {
      VariableLayout &layout = options.variables[spec.name];
      layout.shape = spec.shape;
      for (size_t server = 0; server < servers.size(); ++server)
        if (!spec.rowSplits[server].empty())
          layout.shards.push_back(ShardLocation{
              servers[server]->endpoint(), spec.rowSplits[server][0], spec.rowSplits[server][1]});
    }
    return options;
  }

  std::unique_ptr<PsClient> client(std::string token = kToken) const {
    auto created = PsClient::create(clientOptions(std::move(token)));
    EXPECT_TRUE(bool(created)) << llvm::toString(created.takeError());
    return created ? std::move(*created) : nullptr;
  }

  std::vector<std::shared_ptr<runtime::VariableStore>> stores;
  std::vector<std::unique_ptr<ParameterServer>> servers;
};

} // namespace prism::runtime::ps::testing
